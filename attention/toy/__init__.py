"""The toy side: attention on small hand-made vectors, every step kept (numpy only, never torch; its charts are
attention.figures.toy's).

Modules (each is public: the toy pages and notebooks import them by name; `import attention` re-exports
the math):
    trace          AttentionTrace / MultiHeadTrace: q, k, v, scores, scaled, weights, output, every step named
    core           scaled dot-product attention, softmax, entropy, projections
    scoring        other ways to score a query against a key (additive, general, ...): METHODS, FORMULAS
    masks          causal and padding masks
    multihead      several heads side by side, and the toy translation's cross-attention
    positions      sinusoidal and rotary positions
    lookup         hard and soft lookup (the apple / banana / chair table)
    scaling        why scores are divided by sqrt(d)
    ambiguity      the toy "bank" and "it": context pulling a word's vector
    live           the frames a live slider looks up (the browser does no attention math)
    examples       the hand-built vectors from the seeds, and how they were chosen
    questions      predict-then-see questions of the toy pages, answered from the state they reveal
    rounding       how a toy page writes a number (weights to thousandths, everywhere the page says them)
"""
