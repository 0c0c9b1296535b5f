"""The floor of a page as big as Model heads (issue 46): the app's sidebar of pages and as many Streamlit elements
as Model heads draws for a 16-token sentence, of the same kinds (ELEMENTS, counted from its element tree), with
no model and no chart. benchmarks.browser times input -> idle here beside the trivial page and Model heads:
what Streamlit itself costs for a page of that size, before any attention is computed or drawn."""

import streamlit as st

# Model heads' elements for a 16-token MiniLM sentence (AppTest's tree; its three canvases not counted):
# kind -> how many. Columns and blocks come with the selectboxes, drawn two to a row.
ELEMENTS = {"subheader": 4, "caption": 7, "markdown": 3, "selectbox": 4, "toggle": 5, "number_input": 2,
            "button": 3, "download_button": 2, "file_uploader": 1, "expander": 2, "latex": 1, "radio": 1, "divider": 1}


def page() -> None:
    st.title("Elements")
    text = st.text_area("Sentence", key="sentence")
    n = len(text)  # every element changes with the text, as Model heads' do
    draw = {"subheader": lambda i: st.subheader(f"Section {i} · {n}"),
            "caption": lambda i: st.caption(f"A caption with **bold** and a number: {n * i:,}."),
            "markdown": lambda i: st.markdown(f"Some markdown about *{text[:20]}* and {n} characters."),
            "selectbox": lambda i: st.columns(2)[i % 2].selectbox(f"Pick {i}", range(n + 3), key=f"s{i}"),
            "toggle": lambda i: st.toggle(f"Switch {i}", key=f"t{i}"),
            "number_input": lambda i: st.number_input(f"Number {i}", 1, 30, 1, key=f"n{i}"),
            "button": lambda i: st.button(f"Button {i}", key=f"b{i}"),
            "download_button": lambda i: st.download_button(f"CSV {i}", text[:100], f"e{i}.csv", key=f"d{i}"),
            "file_uploader": lambda i: st.file_uploader("Or a text file", type=["txt"], key=f"f{i}"),
            "expander": lambda i: st.expander(f"More {i}").markdown(f"Inside {n}"),
            "latex": lambda i: st.latex(rf"\sum_j w_{{ij}} = {n}"),
            "radio": lambda i: st.radio("Your prediction", ["a", "b", "c"], index=None, key=f"r{i}", horizontal=True),
            "divider": lambda i: st.divider()}
    for kind, count in ELEMENTS.items():
        for i in range(count):
            draw[kind](i)
    st.text(f"{len(text.split())} words: {text[:40]}")  # the line benchmarks.browser.input_to_idle waits for


if __name__ == "__main__":  # as `streamlit run` runs it (benchmarks.run imports ELEMENTS)
    pages = [st.Page(page, title="Elements", url_path="elements", default=True)]
    pages += [st.Page(lambda: None, title=f"Page {i}", url_path=f"p{i}") for i in range(17)]  # the app's 18 entries
    st.set_page_config(page_title="Elements", layout="wide")
    st.navigation({"Start": pages[:1], "Toy examples": pages[1:9], "Pretrained models": pages[9:]},
                  expanded=True).run()
