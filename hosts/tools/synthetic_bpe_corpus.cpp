#include "dwell/tools/synthetic_bpe_corpus.hpp"

#include <array>

namespace dwell {
namespace {

// Written for dwell. Repetition is deliberate: pairs that recur are the ones
// BPE merges, so common words, digits and characters get tokens of their own.
constexpr std::array<std::string_view, 37> kParagraphs = {
    "The little robot woke up early. It didn't know where it was, but it wasn't afraid. "
    "\"Hello?\" it said. Nobody answered, so it rolled to the window and looked outside. "
    "The sun was rising over the hills, and the birds were singing in the trees.",

    "We're going to the market today. You'll need a bag, and I've got the list: apples, "
    "bread, cheese, milk, eggs and tea. They're open from 8:30 to 17:45, so we'd better "
    "hurry! It's a long walk, isn't it? I'd say it's about 3.5 kilometres.",

    "Once upon a time, there was a girl who loved numbers. She counted 1, 2, 3, 4, 5, 6, 7, "
    "8, 9 and 10 every morning. Her favourite number was 42, but her brother's was 1,000,000. "
    "In 2024 they wrote 3.14159 on the wall, then 2.71828, then 1.41421.",

    "The weather report said: temperature 21 degrees, wind 15 km/h, rain 30%. Tomorrow's "
    "forecast is better -- sunny all day, with a high of 26 degrees... or so they say.",

    "def count_words(text):\n    words = text.split()\n    return len(words)\n\n"
    "for (int i = 0; i < n; ++i) {\n    total += values[i] * 2;\n}\n"
    "if (x != y && y >= 0) { return x + y; } else { return -1; }\n",

    "int main(int argc, char** argv) {\n    std::vector<int> v = {1, 2, 3};\n"
    "    printf(\"%d items\\n\", (int)v.size());\n    return 0;\n}\n",

    "const result = items.map((item) => item.value * 2).filter((v) => v > 10);\n"
    "console.log(`total: ${result.length}`);\n"
    "SELECT name, age FROM users WHERE age >= 18 ORDER BY name;\n",

    "今天天气很好，我们去公园散步吧。公园里有很多人，有的人在跑步，有的人在唱歌。"
    "我喜欢在公园里看书，也喜欢和朋友一起聊天。明天我们还去公园吗？",

    "中文是世界上使用人数最多的语言之一。学习中文需要时间，但是很有意思。"
    "我每天学习十个新的汉字，今天学了“天”、“人”、“大”、“小”和“中”。",

    "今日はとても良い天気です。私は友達と一緒に公園へ行きました。"
    "公園では子供たちが遊んでいて、桜の花がきれいに咲いていました。"
    "カタカナの言葉も覚えましょう：コーヒー、テレビ、コンピューター、インターネット。",

    "日本語を勉強しています。ひらがなとカタカナと漢字があります。"
    "毎日少しずつ練習すれば、きっと上手になります。ありがとうございます！",

    "안녕하세요! 저는 한국어를 공부하고 있어요. 한국어는 재미있지만 조금 어려워요. "
    "오늘은 날씨가 좋아서 친구와 같이 산책을 했어요.",

    "Le café était déjà fermé, alors nous sommes allés à la crêperie près de l'église. "
    "Über den Wolken muss die Freiheit wohl grenzenlos sein. "
    "¿Dónde está la estación? Está a la derecha, señor. Ça va très bien, merci!",

    "Привет, как дела? Сегодня хорошая погода, и мы идём гулять в парк. "
    "Москва — столица России. Я люблю читать книги и пить чай.",

    "مرحبا بكم في عالم البرمجة. اللغة العربية جميلة جداً. "
    "نحن نتعلم كل يوم شيئاً جديداً.",

    "Emoji time! 😀 😂 😍 🎉 🚀 🌍 👍 ❤️ 🔥 ✨ 🙂 🙂 🙂. Families: 👨‍👩‍👧‍👦 and "
    "👩‍💻 "
    "and "
    "🏳️‍🌈. "
    "Flags: 🇯🇵 🇨🇳 🇺🇸 🇫🇷 🇩🇪 🇰🇷. Thumbs: 👍🏻 👍🏽 "
    "👍🏿.",

    "She said, \"I can't believe it's already December!\" He replied, \"Neither can I; "
    "time flies.\" They laughed (quietly) and walked home -- it was cold, after all.",

    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. "
    "How vexingly quick daft zebras jump! Pack my box with five dozen liquor jugs.",

    "Version 1.2.3 was released on 2023-11-05 at 09:15:00 UTC. It fixes 17 bugs and adds "
    "4 features. Download size: 12.7 MB (13,312,000 bytes). Checksum: 0x3fa9c2e1.",

    "    Indented line with four spaces.\n\tIndented line with a tab.\n\n"
    "Line one\r\nLine two\r\nLine three\n   trailing spaces   \n",

    "I'm sure you're right, but we've tried that and they'll say no. He'd rather wait; "
    "she'd rather go. It's not what I'd choose, but it's what we've got. Don't worry, "
    "we'll manage. Can't stop now! Won't stop now! Shouldn't we ask first?",

    "math: a^2 + b^2 = c^2; e = mc^2; x_1 + x_2 = 10; 50% of 200 is 100; 3/4 = 0.75; "
    "<b>bold</b> <i>italic</i> [link](https://example.org/page?id=7&lang=en) #tag @user",

    "在2023年，有超过100万人参加了这个活动。价格是99.99元。电话：010-12345678。"
    "東京タワーの高さは333メートルです。2024年4月1日に会いましょう。",

    "Once upon a time, in a small village by the sea, there lived an old fisherman. "
    "Every day he went out in his boat, and every evening he came back with fish. "
    "The children of the village loved his stories about the sea, the wind and the stars.",
    "The library opens at nine o'clock and closes at six. Readers can borrow up to twelve "
    "books for three weeks. Children's stories are on the first floor; science, history and "
    "geography are on the second. Please return your books on time, or you'll pay a fee.",

    "Programming is the art of telling a computer what to do. A program reads input, "
    "computes something useful and writes output. Good programs are simple, correct and "
    "fast; great programs are also easy to change when the requirements change.",

    "struct Point { float x, y; };\nstatic inline float dot(Point a, Point b) {\n"
    "    return a.x * b.x + a.y * b.y;\n}\n#include <stdio.h>\n#define MAX_SIZE 4096\n"
    "while (queue.size() > 0) { auto item = queue.pop(); process(item); }\n",

    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(x.shape, x.sum())\n"
    "class Model:\n    def __init__(self, name):\n        self.name = name\n"
    "    def forward(self, inputs):\n        return [i * 2 for i in inputs]\n",

    "春天来了，花开了，小鸟在树上唱歌。孩子们在草地上跑来跑去，老人们坐在椅子上喝茶。"
    "城市里的生活很忙，但是周末大家都喜欢去郊外走一走，看看山，看看水。",

    "人工智能正在改变我们的生活。手机上的语音助手可以回答问题，翻译文字，还可以写文章。"
    "但是我们也要注意保护个人信息，不要把密码告诉别人。",

    "東京は日本の首都で、人口は約1400万人です。電車はとても便利で、時間通りに来ます。"
    "駅の近くにはレストランやコンビニがたくさんあります。ラーメンと寿司が大好きです。",

    "서울은 한국의 수도입니다. 지하철이 아주 편리하고, 맛있는 음식이 많아요. "
    "김치찌개와 비빔밥을 좋아해요. 주말에는 한강 공원에서 자전거를 타요.",

    "Dear team, thanks for your hard work this quarter! Revenue grew 12% (from $4.2M to "
    "$4.7M), and customer satisfaction reached 94%. Let's keep it up in Q3. Best regards, Ana.",

    "Numbers everywhere: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 200 "
    "1000 2048 4096 65536 1,234,567 -273.15 +3.0e8 ½ ¾ ² ³ Ⅻ ٣ ४.",

    "Dans la forêt, les arbres sont hauts et les rivières sont claires. Les enfants jouent "
    "près de l'eau. Später gehen wir nach Hause und essen zusammen. ¡Qué día tan bonito!",

    "Вечером мы смотрели фильм и пили горячий чай с мёдом. Завтра будет новый день, "
    "и мы снова пойдём на работу. Книга лежит на столе.",

    "He opened the door slowly. The room was dark and quiet. \"Is anyone here?\" he asked. "
    "There was no answer, only the sound of rain on the roof. He smiled; he'd found home.",
};

}  // namespace

std::span<const std::string_view> synthetic_bpe_corpus() {
    return kParagraphs;
}

}  // namespace dwell
