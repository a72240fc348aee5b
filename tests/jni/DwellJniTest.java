import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.dwell.Dwell;
import org.dwell.DwellException;
import org.dwell.DwellRuntime;
import org.dwell.GenerationStats;
import org.dwell.Model;
import org.dwell.Session;

/**
 * The JNI binding on the JVM: tokens stream into a Java callback and equal llama.cpp's greedy
 * continuation, a reply is cancelled from another thread, and failures arrive as
 * DwellException. Args: model.gguf reference.jsonl. Exit 0: passed; 77: the model is absent.
 */
public final class DwellJniTest {
    private static int failures = 0;

    private static void check(boolean ok, String what) {
        System.out.println((ok ? "ok   " : "FAIL ") + what);
        if (!ok) failures++;
    }

    /** The value of "key": "..." in one JSON line (the escapes the file uses). */
    private static String jsonString(String line, String key) {
        int at = line.indexOf("\"" + key + "\": \"") + key.length() + 5;
        StringBuilder out = new StringBuilder();
        for (int i = at; i < line.length(); i++) {
            char c = line.charAt(i);
            if (c == '"') break;
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char e = line.charAt(++i);
            switch (e) {
                case 'n': out.append('\n'); break;
                case 't': out.append('\t'); break;
                case 'u':
                    out.append((char) Integer.parseInt(line.substring(i + 1, i + 5), 16));
                    i += 4;
                    break;
                default: out.append(e);
            }
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        Path model = Path.of(args[0]);
        if (!Files.exists(model)) {
            System.out.println("SKIPPED: model " + model + " not found");
            System.exit(77);
        }
        String line = Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8).get(0);
        String prompt = jsonString(line, "prompt");
        String continuation = jsonString(line, "continuation");
        int nPredict = Integer.parseInt(line.replaceAll(".*\"n_predict\": (\\d+).*", "$1"));

        check(Dwell.version() >> 16 == 1, "C API major version 1");
        // The reference was made with F32 key and value caches.
        Path manifest = Files.createTempFile("dwell-jni", ".toml");
        Files.writeString(manifest, "[[backend]]\nplugin = \"cpu\"\n[kv]\ndtype = \"f32\"\n");
        try (DwellRuntime rt = DwellRuntime.open(manifest.toString(), 2);
                Model m = rt.loadModel(model.toString())) {
            try (Session s = m.newSession()) {
                StringBuilder text = new StringBuilder();
                List<Integer> ids = new ArrayList<>();
                GenerationStats st = s.generate(prompt, nPredict, 0f, 0, (token, piece) -> {
                    if (token >= 0) ids.add(token);
                    text.append(piece);
                    return true;
                });
                check(text.toString().equals(continuation),
                        "greedy continuation of '" + prompt + "' equals llama.cpp's (" + ids.size()
                                + " tokens streamed)");
                check(st.generatedTokens == ids.size() && st.promptTokens > 0, "stats");
            }

            try (Session s = m.newSession()) {
                CountDownLatch first = new CountDownLatch(1);
                CountDownLatch cancelled = new CountDownLatch(1);
                AtomicInteger streamed = new AtomicInteger();
                Thread canceller = new Thread(() -> {
                    try {
                        first.await();
                        s.cancel();
                        cancelled.countDown();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                canceller.start();
                int code = 0;
                try {
                    s.generate("Once upon a time", 400, 0f, 0, (token, piece) -> {
                        streamed.incrementAndGet();
                        first.countDown();
                        try {
                            cancelled.await(10, TimeUnit.SECONDS);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        return true;
                    });
                } catch (DwellException e) {
                    code = e.code();
                }
                canceller.join();
                check(code == DwellException.CANCELLED && streamed.get() < 5,
                        "cancel from another thread stops the reply (DwellException CANCELLED)");
                StringBuilder more = new StringBuilder();
                GenerationStats again =
                        s.generate(" and then", 4, 0f, 0, (t, p) -> more.append(p) != null);
                check(again.generatedTokens == 4, "the session goes on after a cancel");
            }

            try {
                rt.loadModel("/nonexistent/model.gguf");
                check(false, "loading a missing model throws");
            } catch (DwellException e) {
                check(e.code() == DwellException.IO
                                && e.getMessage().contains("/nonexistent/model.gguf"),
                        "a missing model is DwellException IO naming the file: " + e.getMessage());
            }
            try (Session s = m.newSession()) {
                s.generate("Once", 8, 0f, 0, (t, p) -> {
                    throw new IllegalStateException("from the callback");
                });
                check(false, "an exception in the callback propagates");
            } catch (IllegalStateException e) {
                check(e.getMessage().equals("from the callback"),
                        "an exception in the callback stops the reply and propagates");
            }
        } finally {
            Files.deleteIfExists(manifest);
        }
        try {
            DwellRuntime.open("/nonexistent/phone.toml", 0);
            check(false, "a missing manifest throws");
        } catch (DwellException e) {
            check(e.getMessage().contains("/nonexistent/phone.toml"),
                    "a missing manifest is a DwellException naming it");
        }
        System.out.println(failures == 0 ? "jni test: all passed" : "jni test: FAILED");
        System.exit(failures == 0 ? 0 : 1);
    }
}
