"""The everyday loop's floor (issue 46): a Streamlit page with one text box and one line of output, served
the way the app is (serving.streamlit_command's flags). benchmarks.browser times input -> idle here and on
Model heads in the same browser; the ratio is what the app adds to Streamlit's own round trip."""

import streamlit as st

text = st.text_area("Sentence", key="sentence")
st.text(f"{len(text.split())} words: {text[:40]}")  # plain text: no markdown
