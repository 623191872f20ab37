"""Translations compiled in (ui/folding.py) render exactly what the gettext call renders, and a
string the catalog lacks stays a call, so it is still recorded as missing."""

from __future__ import annotations

import pytest
from jinja2 import Environment, select_autoescape

from ui import i18n
from ui.folding import FoldTranslations
from ui.render import TEMPLATES, environment

SOURCE = (
    '<a title="{{ _(\'Main\') }}">{{ _("Reply") }}</a> {{ _("Sign out") }}|'
    '{{ _("100%% sure") }}|{{ _("Up to %(n)s files", n=3) }}|{{ _(word) }}|'
    '{{ _("A string no catalog has") }}|{% if true %}{{ _("Settings") }}{% endif %}'
)


def _env(locale: str, *, fold: bool) -> Environment:
    extensions: list[object] = ["jinja2.ext.i18n"] + ([FoldTranslations] if fold else [])
    env = Environment(autoescape=select_autoescape(default_for_string=True),
                      extensions=extensions)  # type: ignore[arg-type]  # fmt: skip
    env.install_gettext_translations(i18n.catalog(locale), newstyle=True)  # type: ignore[attr-defined]
    env.globals["locale"] = locale
    return env


@pytest.mark.parametrize("locale", i18n.SUPPORTED)
def test_a_folded_string_renders_as_its_call(locale: str) -> None:
    folded = _env(locale, fold=True).from_string(SOURCE).render(word="Reply")
    called = _env(locale, fold=False).from_string(SOURCE).render(word="Reply")
    assert folded == called
    assert "100% sure" in folded


def test_folded_text_is_in_the_compiled_template() -> None:
    code = _env("zh_Hans", fold=True).compile(SOURCE, raw=True)
    assert i18n.catalog("zh_Hans").gettext("Sign out") in code


def test_a_missing_translation_stays_a_call_and_is_recorded() -> None:
    zh = i18n.catalog("zh_Hans")
    template = _env("zh_Hans", fold=True).from_string('{{ _("Nobody translated this") }}')
    zh.missing.discard("Nobody translated this")
    assert template.render() == "Nobody translated this"
    assert "Nobody translated this" in zh.missing
    zh.missing.discard("Nobody translated this")


@pytest.mark.parametrize("locale", i18n.SUPPORTED)
def test_every_page_template_compiles_folded(locale: str) -> None:
    env = environment(locale)
    for path in sorted(TEMPLATES.rglob("*.html")):
        env.get_template(str(path.relative_to(TEMPLATES)))
