"""The words a student meets on the learner's path, each said in one or two sentences a student can read.

Pages show a term's definition on hover where the term first appears (pages/_text.py `explained`); notebooks
can print them. One home: a page that needs a definition asks here, so two pages never explain "softmax"
two ways.

    >>> from attention.glossary import TERMS, definition
    >>> definition("softmax")
"""

TERMS: dict[str, str] = {
    "token": "A piece of text the model reads as one unit: a word, part of a word or a punctuation mark. "
             "A sentence becomes a list of tokens.",
    "␣": "A space at the start of a token, made visible: “␣the” (as in “on the”) and “the” (at the start of a "
         "text) are two different tokens to the model.",
    "embedding": "The list of numbers (a vector) a model uses for a token. Similar tokens get similar vectors.",
    "vector": "A list of numbers, read as a point or an arrow in space.",
    "dot product": "Multiply two vectors number by number and add up: large when they point the same way, "
                   "near 0 when they are unrelated.",
    "query": "What a token is looking for: its vector times the matrix W_Q. Written q.",
    "key": "What a token offers to be found by: its vector times W_K. A query's score with a key is their dot "
           "product. Written k.",
    "value": "What a token hands over when it is attended to: its vector times W_V. The output is a weighted "
             "sum of values. Written v.",
    "score": "How well a query matches a key: their dot product q·k. Any number.",
    "scaled score": "The score divided by √d_k (more generally, times the model's scale) so that it does not grow "
                    "with the vectors' length: what softmax turns into weights.",
    "softmax": "Turns scores into weights that are positive and add up to 1: e to the power of each score, "
               "divided by their sum. The largest score gets the largest weight.",
    "weight": "The share of attention a query gives one key: between 0 and 1, and a query's weights add up "
              "to 1.",
    "d_k": "The length of each query and key vector (their number of dimensions).",
    "dimension": "One of the numbers in a vector; d is how many there are.",
    "entropy": "How spread out a set of weights is: 0 when all the weight is on one key, largest when it "
               "is shared equally. Measured in nats (natural-log units).",
    "nats": "The unit of entropy when it is computed with the natural logarithm.",
    "temperature": "A number T the scores are divided by before softmax: below 1 sharpens the weights, "
                   "above 1 flattens them.",
    "head": "One attention computation with its own W_Q, W_K and W_V. A layer runs several heads side by side, "
            "each free to look for something different.",
    "layer": "One step of the model: attention (several heads) then a small neural network. Models stack "
             "many layers; each reads what the ones before wrote.",
    "causal mask": "A rule that a token may look only at itself and the tokens before it (as a model writing "
                   "text must). Later tokens get weight 0.",
    "mask": "A rule that hides some keys from a query: their scores become −∞, so their weights are 0.",
    "cross-attention": "Attention whose queries come from one sequence (a translation being written) and "
                       "keys and values from another (the sentence being translated).",
    "positional encoding": "Numbers added to each token's vector that say where it stands, so the model can "
                           "tell word order.",
    "sinusoidal": "Positions written as sines and cosines of several frequencies (the original Transformer's "
                  "choice).",
    "rotary": "Positions given by turning each query and key by an angle that grows with the position (RoPE): "
              "the score then depends on how far apart two tokens are.",
    "GRU": "A recurrent network: it reads a sequence one item at a time and keeps a running summary vector.",
    "encoder": "A model (or part) that reads a whole text at once, every token seeing every other.",
    "decoder": "A model that writes text one token at a time, each token seeing only the ones before it.",
    "context vector": "The single vector an encoder without attention passes to its decoder: everything the "
                      "decoder knows about the input.",
    "logit": "The model's raw score for a possible next token, before softmax turns all of them into "
             "probabilities.",
    "sink": "A token (often the first, or [CLS] and [SEP]) where heads park weight they do not need "
            "elsewhere. A large weight on a sink usually means the head is idle for that query.",
    "layer norm": "A step that rescales a vector to a standard size before the next part of the model reads "
                  "it.",
    "residual stream": "The running sum each layer reads from and adds its output to: the model's working "
                       "memory for each token.",
    "ablation": "Removing a part (here a head's output) and running the model again, to see what changes.",
    "logit lens": "Reading the model's guess for the next token after each layer, as if the model stopped "
                  "there.",
    "patching": "Running the model on one input while copying in a part's activity from another input, to "
                "find where the difference between the two enters.",
    "induction head": "A head that finds an earlier copy of the current token and looks at the token that "
                      "came after it, so the model can repeat a pattern.",
    "previous-token head": "A head that looks at the token right before the current one. An induction head "
                           "reads what it wrote.",
    "MLP": "The small neural network in each layer, after attention (a multi-layer perceptron). It works on each "
           "token's vector alone.",
}


def definition(term: str) -> str:
    """The definition of `term` (any case); KeyError naming the terms there are."""
    for name, text in TERMS.items():
        if name.lower() == term.lower():
            return text
    raise KeyError(f"{term!r} is not in the glossary: {', '.join(TERMS)}")
