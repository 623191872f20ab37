"""A message's plain text as safe HTML (ui/message_text.py): escaped, line breaks kept, http(s)
URLs linked and nothing else, quoted text folded, characters that disguise text removed."""

from __future__ import annotations

from markupsafe import Markup

from ui.message_text import LINK_REL, render


def _link(url: str) -> str:
    return f'<a href="{url}" rel="{LINK_REL}" target="_blank">{url}</a>'


def test_markup_in_a_message_is_shown_as_text() -> None:
    html = render('<script>alert("x")</script><img src=x onerror=alert(1)>')
    assert isinstance(html, Markup)
    assert str(html) == (
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    )


def test_line_breaks_are_kept_whatever_the_sender_used() -> None:
    assert str(render("one\ntwo\r\nthree\rfour")) == "one<br>\ntwo<br>\nthree<br>\nfour"
    assert str(render(None)) == "" and str(render("")) == ""


def test_http_and_https_urls_are_links_without_the_sentences_punctuation() -> None:
    assert str(render("See https://example.com/a?b=1&c=2.")) == (
        f"See {_link('https://example.com/a?b=1&amp;c=2')}."
    )
    wiki = "https://en.wikipedia.org/wiki/Foo_(bar)"
    assert str(render(f"({wiki})")) == f"({_link(wiki)})"
    assert str(render("http://a")) == _link("http://a")
    assert str(render("https://.")) == "https://."  # nothing after the scheme: no link


def test_other_schemes_are_never_links() -> None:
    for text in [
        "javascript:alert(1)",
        "JavaScript:alert(document.cookie)",
        "data:text/html,&lt;b&gt;",
        "vbscript:msgbox(1)",
        "javascript://https://example.com",  # the https part follows a slash: not a URL start
        "ftp://example.com/file",
    ]:
        assert "<a " not in str(render(text)), text


def test_a_url_cannot_break_out_of_its_attribute() -> None:
    html = str(render('https://x.test/"onmouseover="alert(1)'))
    assert html == _link("https://x.test/") + "&#34;onmouseover=&#34;alert(1)"
    assert str(render("https://x.test/<script>")) == _link("https://x.test/") + "&lt;script&gt;"


def test_quoted_lines_and_an_emails_tail_are_folded() -> None:
    html = str(render("My answer\n> your question\n> more of it\nThanks", "Quoted"))
    assert html == (
        "My answer\n"
        '<details class="quoted"><summary>Quoted</summary>'
        "<div>&gt; your question<br>\n&gt; more of it</div></details>\n"
        "Thanks"
    )
    mail = (
        "Fixed, thanks!\nOn Mon, 1 Jan 2024 at 10:00, Lin <lin@acme.test> wrote:\n> It broke\nold"
    )
    html = str(render(mail))
    assert html.startswith('Fixed, thanks!\n<details class="quoted"><summary>Quoted text</summary>')
    assert "wrote:<br>\n&gt; It broke<br>\nold</div></details>" in html
    assert "&lt;lin@acme.test&gt;" in html
    # A line that only ends in "wrote:" with nothing after it is not a quote's header.
    assert "<details" not in str(render("On Monday I wrote:"))


def test_the_label_of_a_fold_is_escaped() -> None:
    assert "<summary>&lt;b&gt;</summary>" in str(render("> q", "<b>"))


def test_characters_that_disguise_text_are_removed_or_shown() -> None:
    # A right-to-left override would show "txt.exe" as "exe.txt"; controls and NUL show as U+FFFD.
    assert str(render("report\u202etxt.exe")) == "reporttxt.exe"
    assert str(render("a\x00b\x07c\x1bd")) == "a\ufffdb\ufffdc\ufffdd"
    assert str(render("tab\tkept")) == "tab\tkept"
