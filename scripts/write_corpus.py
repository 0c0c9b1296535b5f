"""Write the default corpus, attention/models/analyses/default_corpus.txt: a few hundred short texts written
for this project, one per paragraph (blank lines between), so that "a head across a corpus" works offline.

    .venv/bin/python scripts/write_corpus.py

Kinds of text, each where a known kind of head shows itself: the app's own examples (the seeds' sentences),
ambiguous words in two senses, coreference (Winograd-style pairs), names in the indirect-object template,
repeated random word sequences (induction), lists and numbers, dates and arithmetic, a little code, and plain
prose. Built from fixed lists with a fixed seed: running it again writes the same file.
"""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from attention.toy import examples as ex  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "attention" / "models" / "analyses" / "default_corpus.txt"

AMBIGUOUS = [  # (word, sense 1, sense 2)
    ("bank", "We had a picnic on the grassy bank of the river.", "She went to the bank to open a savings account."),
    ("bat", "A bat flew out of the cave at dusk.", "He swung the bat and hit the ball over the fence."),
    ("crane", "A white crane stood in the shallow marsh.", "The crane lifted the steel beam onto the roof."),
    ("spring", "The flowers bloom early in the spring.", "The old mattress had a broken spring."),
    ("match", "He struck a match to light the candle.", "Our team won the match by two goals."),
    ("bark", "The bark of the oak tree was rough and grey.", "The dog let out a loud bark at the stranger."),
    ("seal", "A seal was sleeping on the rocks by the harbour.", "Break the seal before you open the jar."),
    ("light", "The box was so light that a child could carry it.", "Turn on the light, it is getting dark."),
    ("rock", "The climbers rested on a flat rock.", "They played loud rock music all night."),
    ("pitcher", "The pitcher threw a fast ball to the batter.", "She filled the pitcher with cold lemonade."),
    ("plant", "Water the plant on the windowsill every week.", "The car plant employs two thousand workers."),
    ("bow", "She tied the ribbon in a neat bow.", "The actors took a bow at the end of the play."),
    ("date", "We went out for dinner on our first date.", "The date on the letter was the third of May."),
    ("fair", "The judge made a fair decision.", "We rode the big wheel at the summer fair."),
    ("mouse", "The mouse ran under the kitchen table.", "Click the left button of the mouse twice."),
    ("key", "I lost the key to the front door.", "The song is written in the key of C major."),
    ("palm", "Coconuts grow on a tall palm by the beach.", "He held the coin in the palm of his hand."),
    ("ring", "He gave her a gold ring with a small stone.", "Please ring me when you arrive at the station."),
    ("scale", "The fish had a shiny silver scale.", "Put the flour on the kitchen scale."),
    ("wave", "A huge wave crashed onto the shore.", "She gave a friendly wave from the window."),
    ("letter", "The first letter of the alphabet is A.", "I wrote a long letter to my grandmother."),
    ("park", "The children played football in the park.", "You can park the car behind the hotel."),
    ("watch", "My watch stopped at midnight.", "We sat down to watch the film together."),
    ("trunk", "The elephant lifted the log with its trunk.", "Put the suitcases in the trunk of the car."),
]
COREFERENCE = [  # (sentence, the pronoun's antecedent in words) -- the antecedent is not written down here
    "The trophy didn't fit in the suitcase because it was too big.",
    "The trophy didn't fit in the suitcase because it was too small.",
    "The city council refused the demonstrators a permit because they feared violence.",
    "The city council refused the demonstrators a permit because they advocated violence.",
    "The man couldn't lift his son because he was so weak.",
    "The man couldn't lift his son because he was so heavy.",
    "Paul tried to call George on the phone, but he wasn't successful.",
    "Paul tried to call George on the phone, but he wasn't available.",
    "The lawyer asked the witness a question, but she was reluctant to repeat it.",
    "The lawyer asked the witness a question, but she was reluctant to answer it.",
    "Joan made sure to thank Susan for all the help she had given.",
    "Joan made sure to thank Susan for all the help she had received.",
    "The fish ate the worm. It was hungry.",
    "The fish ate the worm. It was tasty.",
    "The painting in the museum was clearly visible because it was lit from above.",
    "Sam pulled up a chair to the piano, but it was broken, so he had to stand instead.",
    "Sam pulled up a chair to the piano, but it was broken, so he had to sing instead.",
    "Anna did a lot better than her good friend Lucy on the test because she had studied so hard.",
    "The delivery truck zoomed by the school bus because it was going so fast.",
    "The delivery truck zoomed by the school bus because it was going so slow.",
]
NAMES = ["Mary", "John", "Alice", "Bob", "Sarah", "David", "Emma", "James", "Laura", "Peter", "Anna", "Tom",
         "Lucy", "Mark", "Kate", "Paul"]
PLACES = ["store", "park", "school", "market", "library", "beach", "station", "garden"]
OBJECTS = ["a drink", "a book", "a ball", "an apple", "a letter", "a ticket", "a flower", "a key"]
VERBS = ["gave", "handed", "passed", "sent", "threw", "showed"]
WORDS = ("river stone paper window garden yellow quiet machine bottle ladder forest candle pencil mirror "
         "thunder orange silver island basket engine rabbit winter ocean violet marble copper saddle "
         "lantern meadow harbor crystal").split()
FRUITS = ["apples", "pears", "plums", "figs", "grapes", "cherries", "lemons", "peaches", "melons", "dates"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
CODE = [
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "for i in range(10):\n    if i % 2 == 0:\n        print(i)",
    "numbers = [3, 1, 4, 1, 5, 9, 2, 6]\nnumbers.sort()\nprint(numbers)",
    "def factorial(n):\n    return 1 if n <= 1 else n * factorial(n - 1)",
    "with open('data.txt') as f:\n    lines = f.readlines()",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y",
    "const total = items.reduce((sum, item) => sum + item.price, 0);",
    "function greet(name) {\n  return 'Hello, ' + name + '!';\n}",
    "SELECT name, age FROM users WHERE age > 30 ORDER BY name;",
    "if (x > 0) {\n  y = x * 2;\n} else {\n  y = -x;\n}",
    "import numpy as np\nx = np.zeros((3, 4))\nprint(x.shape)",
    "while queue:\n    node = queue.pop(0)\n    visit(node)",
    "counts = {}\nfor word in text.split():\n    counts[word] = counts.get(word, 0) + 1",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "x = [i * i for i in range(5)]\nassert x == [0, 1, 4, 9, 16]",
]
PROSE = [
    "The cat sat on the mat and watched the birds outside.",
    "It rained all morning, so we stayed inside and read.",
    "The train to the coast leaves at half past nine.",
    "Scientists measured the temperature of the lake every hour.",
    "My sister bakes bread every Sunday before breakfast.",
    "The museum was closed for repairs until the end of the month.",
    "A small boat drifted slowly across the calm water.",
    "The teacher asked the students to open their books at page twelve.",
    "After the storm, the streets were covered with leaves.",
    "He forgot his umbrella on the bus again.",
    "The recipe calls for two eggs, a cup of sugar and some butter.",
    "Our neighbours are building a new fence around their garden.",
    "The old lighthouse has guided ships for more than a century.",
    "She learned to play the violin when she was seven.",
    "The price of coffee rose sharply last year.",
    "The children built a sandcastle with towers and a moat.",
    "Most birds in this forest sing only in the early morning.",
    "The committee will announce its decision next week.",
    "He walked to the top of the hill to watch the sunset.",
    "The library lends books, films and board games.",
    "Bees carry pollen from one flower to the next.",
    "The bridge was painted bright red so that ships could see it in the fog.",
    "We ordered soup, a salad and two glasses of water.",
    "The museum's oldest painting is almost five hundred years old.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "The capital of France is Paris, and the capital of Italy is Rome.",
    "The capital of Spain is Madrid.",
    "The sun rises in the east and sets in the west.",
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, a young girl lived with her grandmother near the woods.",
    "The meeting was moved from Tuesday to Thursday afternoon.",
    "Please remember to switch off the lights when you leave.",
    "The orchestra tuned their instruments before the concert began.",
    "The farmer planted wheat in the north field and barley in the south field.",
    "The plane landed safely despite the strong wind.",
    "A good night's sleep helps the brain store what it learned during the day.",
    "The shop on the corner sells fresh fish every Friday.",
    "Every winter the lake freezes and people skate on it.",
    "The company opened three new offices in Asia last year.",
    "She wrote her name at the top of the page and began the exam.",
]


def texts() -> list[str]:
    rng = random.Random(0)
    out = list(ex.BANK_SENTENCES) + list(ex.IT_SENTENCES) + list(ex.PLANT_SENTENCES)
    out += [prompt for prompt, _, _ in ex.PREDICTION_EXAMPLES.values()]
    out += [" ".join(ex.SOURCE_SENTENCE) + "."]
    for _, first, second in AMBIGUOUS:
        out += [first, second]
    out += COREFERENCE
    for _ in range(40):  # the indirect-object template (IOI): the model should name the other person
        a, b = rng.sample(NAMES, 2)
        out.append(f"When {a} and {b} went to the {rng.choice(PLACES)}, {b} {rng.choice(VERBS)} "
                   f"{rng.choice(OBJECTS)} to {a}.")
    for _ in range(30):  # induction: a random sequence of words, then the same again
        words = rng.sample(WORDS, rng.randint(5, 9))
        out.append(" ".join(words) + ". " + " ".join(words) + ".")
    for _ in range(20):
        items = rng.sample(FRUITS, rng.randint(3, 6))
        out.append(f"At the market we bought {', '.join(items[:-1])} and {items[-1]}.")
    for _ in range(15):
        start = rng.randint(1, 50)
        out.append(", ".join(str(start + i) for i in range(rng.randint(6, 12))))
    for _ in range(15):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        out.append(f"{a} plus {b} equals {a + b}, and {a} times {b} equals {a * b}.")
    for _ in range(15):
        day, month, year = rng.randint(1, 28), rng.choice(MONTHS), rng.randint(1900, 2030)
        out.append(f"The event took place on {month} {day}, {year}, and lasted {rng.randint(2, 9)} days.")
    for _ in range(10):
        months = MONTHS[rng.randint(0, 6):][:rng.randint(4, 6)]
        out.append("The months were " + ", ".join(months) + ".")
    out += CODE + PROSE
    return out


if __name__ == "__main__":
    found = texts()
    OUT.write_text("\n\n".join(t.strip().replace("\n\n", "\n") for t in found) + "\n")  # a blank line ends a text
    print(f"wrote {OUT} ({len(found)} texts)")
