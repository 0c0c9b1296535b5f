"""Our own prose on a page (never a user's text: that goes through pages/_text.py's md): each glossary term
(attention.glossary) explained on hover, and on focus for a keyboard, where it first appears on the page.

    fresh_page()            at the top of a page (intro does it): no term explained yet
    prose(text)             our markdown, its terms not yet explained marked with their definitions
    for_developers(text)    where the page's numbers come from, for a reader of the code
"""

import html
import re

import streamlit as st

from attention.glossary import TERMS

EXPLAINED = "lessons.explained"  # session key: the glossary terms already explained on this run of the page


def fresh_page() -> None:
    """No glossary term explained yet on this run of the page."""
    st.session_state[EXPLAINED] = set()


def prose(text: str, container=None) -> None:
    """Our own markdown, each glossary term not yet explained on this page marked with its definition."""
    (container or st).markdown(explained(text, st.session_state.setdefault(EXPLAINED, set())),
                               unsafe_allow_html=True)


def for_developers(text: str) -> None:
    """Where the page's numbers come from, for a reader of the code: the only place a page's prose names
    modules, functions or the seed texts."""
    with st.expander("For developers", icon=":material/code:"):
        st.markdown(text)


def explained(text: str, skip: set[str]) -> str:
    """Our own markdown `text` (never a user's) with the first appearance of each glossary term
    (attention.glossary) not in `skip` wrapped in `<abbr>`: its definition on hover, and on focus for a
    keyboard. The terms explained are added to `skip`. A word written [[so]] is the everyday word, not the term:
    shown plain, never explained ("its largest [[value]] is 2.08" had the value vector's definition, issue 68).
    Show the result with unsafe_allow_html=True."""
    found: list[str] = []

    def mark(match: re.Match) -> str:
        term = _TERM_OF[match.group(1).lower()]
        if term in skip:
            return match.group(0)
        skip.add(term)
        found.append(f'<abbr title="{html.escape(TERMS[term], quote=True)}" tabindex="0">{match.group(0)}</abbr>')
        return f"\x00{len(found) - 1}\x00"  # a placeholder: a definition's own words are not marked again

    parts = _PROTECTED.split(text)  # math, code and [[everyday words]] are left as they are: odd indices
    marked = "".join((part[2:-2] if part.startswith("[[") else part) if i % 2 else _TERMS_RE.sub(mark, part)
                     for i, part in enumerate(parts))
    return re.sub("\x00(\\d+)\x00", lambda m: found[int(m.group(1))], marked)


_PROTECTED = re.compile(r"(\$[^$]*\$|`[^`]*`|\[\[[^\]]*\]\])")
_TERM_OF = {t.lower(): t for t in TERMS}
_TERMS_RE = re.compile(r"(?<![\w/\\-])(" + "|".join(re.escape(t) for t in sorted(TERMS, key=len, reverse=True))
                       + r")(?:s|es)?(?![\w-])", re.IGNORECASE)
