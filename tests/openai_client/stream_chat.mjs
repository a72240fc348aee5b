// The official openai npm client against `dwell serve`: lists the models,
// streams a chat completion and a completion, and checks each streamed
// reply equals the same request answered whole (greedy). Prints one JSON
// line; exit 0 when everything held.
//   node stream_chat.mjs BASE_URL API_KEY
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const models = await client.models.list();
const model = models.data[0]?.id;
check(typeof model === "string" && model.length > 0, "models.list returns the model");

const messages = [
  { role: "system", content: "You tell short stories." },
  { role: "user", content: "Tell me about a little dog." },
];
const whole = await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0 });
let streamed = "";
let chunks = 0;
let finish = null;
let usage = null;
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 40, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  chunks += 1;
  streamed += choice.delta?.content ?? "";
  if (choice.finish_reason) finish = choice.finish_reason;
}
check(streamed.length > 0, "the stream carried text");
check(chunks > 2, "the reply came in several chunks");
check(streamed === whole.choices[0].message.content, "streamed chat equals the whole reply");
check(finish === whole.choices[0].finish_reason, "the same finish_reason");
check(usage && usage.completion_tokens === whole.usage.completion_tokens, "usage in the last chunk");

const text = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 24, temperature: 0 });
let streamedText = "";
for await (const chunk of await client.completions.create({
  model, prompt: "Once upon a time", max_tokens: 24, temperature: 0, stream: true,
})) streamedText += chunk.choices[0]?.text ?? "";
check(streamedText === text.choices[0].text, "streamed completion equals the whole one");

let status = 0;
try {
  await client.chat.completions.create({ model, messages: [], max_tokens: 4 });
} catch (e) {
  status = e.status;
  check(e.error?.param === "messages", "the 400 names the field");
}
check(status === 400, "an empty conversation is a 400 the client raises");

console.log(JSON.stringify({ model, chunks, streamed, finish, usage, failures }));
process.exit(failures.length === 0 ? 0 : 1);
