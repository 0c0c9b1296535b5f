"""Attention Explorer: the frame. Process settings, page config, navigation over pages/, the chart code fetched
ahead, the screen's styles, the controls kept between pages, and the guard that turns a failure into words;
nothing else.

Run with `make run` (or `attention-explorer`, see serving/command.py). Each page is a thin file in pages/ that
reads its widgets, calls one function of the `attention` package and draws the result. The list of pages
is pages/_site.py.
"""

import functools

import streamlit as st

import serving
from pages._failure import guard_session, run_guarded
from pages._kept import carry_linked
from pages._learner import begin, seen
from pages._partial import page_starts as no_parts_yet
from pages._path import page_starts
from pages._prefetch import prefetch_charts
from pages._screen import screen
from pages._site import HOME, MOVED, SECTIONS, moved_to, page_path

serving.configure_process()  # torch threads, OpenMP and malloc settings, once per server process
serving.warm_model_side()  # the model side imported in the background while the first page is read
guard_session()  # an error in a callback or a fragment reaches the visitor as words, not a traceback
carry_linked()  # the controls of the page just left, kept before Streamlit drops them (pages/_kept.py)
# An emoji icon: Streamlit draws it as an inline SVG. A ":material/…:" icon is fetched from fonts.gstatic.com,
# and the app runs offline (tests/test_journeys.py records every request a visit makes).
st.set_page_config(page_title="Attention Explorer", page_icon="🔎", layout="wide")

navigation = {"Start": [st.Page(HOME.path, title=HOME.title, icon=HOME.icon, default=True)]}
for section, entries in SECTIONS.items():
    navigation[section] = [st.Page(p.path, title=p.title, icon=p.icon) for p in entries]
navigation["Start"] += [st.Page(functools.partial(moved_to, path), title=old, url_path=old, visibility="hidden")
                       for old, path in MOVED.items()]  # old links keep working
begin()  # this browser's progress and class, read from the database (pages/_learner.py)
page = st.navigation(navigation, expanded=True)  # every page listed: a collapsed list hid the model pages
seen(page.url_path or "home")  # the learner's place: the pages opened, by their URL name ("lookup")
screen()  # printed pages, phones, heatmap numbers only where cells hold them (pages/_screen.py)
prefetch_charts()  # Streamlit's chart and table code, loaded while the browser is idle (pages/_prefetch.py)
page_starts(page_path(page.url_path))  # a page that stops early still ends with Back and Next (pages/_path.py)
no_parts_yet()  # the parts of a page a widget reruns alone, drawn anew by this run (pages/_partial.py)
run_guarded(page)  # an error in the page: words and a reference, never a traceback (pages/_failure.py)
