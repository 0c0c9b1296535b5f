"""Attention Explorer: the frame. Process settings, page config, navigation over pages/, and the chart code
fetched ahead; nothing else.

Run with `make run` (or `attention-explorer`, see serving.py). Each page is a thin file in pages/ that
reads its widgets, calls one function of the `attention` package and draws the result. The list of pages
is pages/_site.py.
"""

import functools

import streamlit as st

import serving
from pages._learner import begin, seen
from pages._prefetch import prefetch_charts
from pages._site import HOME, MOVED, SECTIONS, moved_to

serving.configure_process()  # torch threads, OpenMP and malloc settings, once per server process
serving.warm_model_side()  # the model side imported in the background while the first page is read
# An emoji icon: Streamlit draws it as an inline SVG. A ":material/…:" icon is fetched from fonts.gstatic.com,
# and the app runs offline (tests/test_journeys.py records every request a visit makes).
st.set_page_config(page_title="Attention Explorer", page_icon="🔎", layout="wide")

PRINT_STYLE = """<style>@media print {
  [data-testid="stSidebar"], [data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"],
  [data-testid="stBaseButton-secondary"], [data-testid="stBaseButton-primary"], [data-testid="stDownloadButton"],
  [data-testid="stSelectbox"], [data-testid="stCheckbox"], [data-testid="stPageLink"],
  .st-key-noprint { display: none !important; }
  [data-testid="stMain"], [data-testid="stAppViewContainer"] { margin: 0 !important; padding: 0 !important; }
  [data-testid="stMainBlockContainer"] { max-width: 100% !important; padding: 0 1rem !important; }
}</style>"""
navigation = {"Start": [st.Page(HOME.path, title=HOME.title, icon=HOME.icon, default=True)]}
for section, entries in SECTIONS.items():
    navigation[section] = [st.Page(p.path, title=p.title, icon=p.icon) for p in entries]
navigation["Start"] += [st.Page(functools.partial(moved_to, path), title=old, url_path=old, visibility="hidden")
                       for old, path in MOVED.items()]  # old links keep working
begin()  # this browser's progress and class, read from the database (pages/_learner.py)
page = st.navigation(navigation, expanded=True)  # every page listed: a collapsed list hid the model pages
seen(page.url_path or "home")  # the learner's place: the pages opened, by their URL name ("lookup")
st.html(PRINT_STYLE)  # a page printed: its content, without the sidebar, the toolbar and the controls
prefetch_charts()  # Streamlit's chart and table code, loaded while the browser is idle (pages/_prefetch.py)
page.run()
