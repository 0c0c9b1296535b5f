"""User text inside Streamlit markdown (st.info, st.error, subheaders...) shown literally.

Streamlit does not render raw HTML in markdown, but markdown itself would still act on a user's `**`,
`[link](...)`, `$math$` or `<b>`: every user-supplied string goes through `md()` before it is formatted in.
"""

import html
import re

from attention.glossary import TERMS

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&:])")


def md(text) -> str:
    """`text` with every markdown/LaTeX/HTML-significant character backslash-escaped."""
    return _SPECIAL.sub(r"\\\1", str(text))


def md_token(token: str) -> str:
    """A model's token inside markdown: escaped like md(), its newlines shown as ⏎ (a generated "\n\n"
    would otherwise start a paragraph and hide that it was a token)."""
    return md(token.replace("\n", "⏎"))


def explained(text: str, skip: set[str]) -> str:
    """Our own markdown `text` (never a user's) with the first appearance of each glossary term
    (attention.glossary) not in `skip` wrapped in `<abbr>`: its definition on hover, and on focus for a
    keyboard. The terms explained are added to `skip`. Show the result with unsafe_allow_html=True."""
    found: list[str] = []

    def mark(match: re.Match) -> str:
        term = _TERM_OF[match.group(1).lower()]
        if term in skip:
            return match.group(0)
        skip.add(term)
        found.append(f'<abbr title="{html.escape(TERMS[term], quote=True)}" tabindex="0">{match.group(0)}</abbr>')
        return f"\x00{len(found) - 1}\x00"  # a placeholder: a definition's own words are not marked again

    parts = _PROTECTED.split(text)  # math and code are left as they are: odd indices
    marked = "".join(part if i % 2 else _TERMS_RE.sub(mark, part) for i, part in enumerate(parts))
    return re.sub("\x00(\\d+)\x00", lambda m: found[int(m.group(1))], marked)


_PROTECTED = re.compile(r"(\$[^$]*\$|`[^`]*`)")
_TERM_OF = {t.lower(): t for t in TERMS}
_TERMS_RE = re.compile(r"(?<![\w/\\-])(" + "|".join(re.escape(t) for t in sorted(TERMS, key=len, reverse=True))
                       + r")(?:s|es)?(?![\w-])", re.IGNORECASE)
