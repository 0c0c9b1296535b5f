"""User text inside Streamlit markdown (st.info, st.error, subheaders...) shown literally.

Streamlit does not render raw HTML in markdown, but markdown itself would still act on a user's `**`,
`[link](...)`, `$math$` or `<b>`: every user-supplied string goes through `md()` before it is formatted in.
"""

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&:])")


def md(text) -> str:
    """`text` with every markdown/LaTeX/HTML-significant character backslash-escaped."""
    return _SPECIAL.sub(r"\\\1", str(text))


def md_token(token: str) -> str:
    """A model's token inside markdown: escaped like md(), its newlines shown as ⏎ (a generated "\n\n"
    would otherwise start a paragraph and hide that it was a token)."""
    return md(token.replace("\n", "⏎"))
