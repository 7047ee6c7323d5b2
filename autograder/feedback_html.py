"""The markup a feedback page may hold: nbconvert's `clean_html` filter, replaced for the course's feedback pages.

A feedback page (nbgrader's generate_feedback, autograder/feedback_templates/course_feedback/) shows a student's
markdown cells and the HTML/markdown outputs of their code cells; the student and an instructor open it in a browser.
With `HTMLExporter.sanitize_html` on (autograder/nbgrader_config.py), nbconvert's templates pass that markup through
the Jinja filter `clean_html` -- whose allow-list (bleach's defaults plus div/pre/code/span/table/tr/td) lacks what
nbconvert's own markdown renderer writes: `<h1 id=...>`, `<p>`, `<thead><th>`, `<img>`, `<hr>`, so a week-1 page
showed dozens of escaped tags as text. `clean_html` below (registered under nbconvert's name through
`HTMLExporter.filters`, so every use in nbconvert's templates and the course's takes it) allows what the renderer
and a notebook's ordinary outputs produce, and nothing that runs:

- tags: headings, paragraphs, emphasis, lists, quotes, rules, tables, code (pygments' div/pre/span), images, the
  disabled checkbox of a task list; anything else (script, style, iframe, object, form, svg, ...) is escaped and shows
  as text, as nbconvert's filter does;
- attributes: `class` (the CSS hooks of nbconvert, pygments, MathJax and pandas), `id` on headings only (the targets
  of nbconvert's anchor links), a table cell's alignment (CSS `text-align` only), an image's alt/size; never an
  event handler (`on...`), never `style` beyond that one property;
- URLs: a link goes to `#anchor`, http or https; an image is an inline PNG or JPEG (`data:image/png;base64,`); no
  `javascript:`, no other `data:` type, no relative path (a feedback page has no files beside it to point at).

Maths needs no markup: the renderer leaves `$...$` and `$$...$$` as text (with `<` escaped as `&lt;`, which is text
again to MathJax), and the page's MathJax typesets it. Built on bleach, the sanitizer nbconvert itself depends on.
"""
from __future__ import annotations

import bleach
from bleach.css_sanitizer import CSSSanitizer

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
TAGS = frozenset({
    *HEADINGS, "p", "br", "hr", "div", "span", "pre", "code", "kbd", "samp", "blockquote",
    "em", "strong", "b", "i", "u", "s", "del", "ins", "sub", "sup", "small", "mark", "abbr",
    "ul", "ol", "li", "dl", "dt", "dd", "input",
    "table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "th", "td",
    "a", "img",
})
# Per tag, the attributes allowed besides `class` (every tag may carry a class). URL-valued ones are checked by value.
ATTRIBUTES = {
    **{h: ("id",) for h in HEADINGS},
    "a": ("href", "title"),
    "img": ("src", "alt", "title", "width", "height"),
    "abbr": ("title",),
    "ol": ("start",),
    "table": ("border",),
    "th": ("style", "colspan", "rowspan", "align"),
    "td": ("style", "colspan", "rowspan", "align"),
    "input": ("type", "disabled", "checked"),  # a task list's tick (a checkbox in no form: it sends nothing)
}
LINKS = ("#", "http://", "https://")
IMAGES = ("data:image/png;base64,", "data:image/jpeg;base64,", "data:image/jpg;base64,")


def _allowed(tag: str, name: str, value: str) -> bool:
    """bleach's attribute test: may `tag` keep `name="value"`? (bleach checks URL schemes again afterwards.)"""
    if name == "class":
        return True
    if name not in ATTRIBUTES.get(tag, ()):
        return False
    v = value.strip().lower()
    if (tag, name) == ("a", "href"):
        return v.startswith(LINKS)
    if (tag, name) == ("img", "src"):
        return v.startswith(IMAGES)
    if (tag, name) == ("input", "type"):
        return v == "checkbox"
    return True


# bleach's Cleaner is reusable (one per process); the protocols are the schemes _allowed lets through.
_CLEANER = bleach.Cleaner(tags=TAGS, attributes=_allowed, protocols={"http", "https", "data"},
                          css_sanitizer=CSSSanitizer(allowed_css_properties=["text-align"]), strip=False)


def clean_html(element) -> str:
    """Sanitize one piece of a feedback page's markup (nbconvert's `clean_html` filter signature: str or bytes)."""
    return _CLEANER.clean(element.decode() if isinstance(element, bytes) else str(element))
