"""The notebook pages' styles, published once in a file of their own instead of inlined in each.

mkdocs-jupyter writes its stylesheets into every notebook page: JupyterLab's whole CSS (575 KB:
widgets, editors, menus), its light theme and the code colours. This hook takes the <style> blocks
out of a notebook page's content and links one published stylesheet instead, holding the rules of
theirs a notebook page can match: those whose classes it uses (a static page has no widget or
editor). The link comes after reader.css, where the inline styles came: the cascade is unchanged.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tinycss2
from mkdocs.utils import get_relative_url

STYLESHEET = "stylesheets/notebooks.css"
STYLE = re.compile(r"<style[^>]*>(.*?)</style>\s*", re.S)
CLASS_ATTRIBUTE = re.compile(r"""\bclass=["']([^"']*)["']""")
CLASS = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
# What a selector's classes leave aside: a negation (.a:not(.b) matches without .b) and pseudo
# classes and elements.
NOT_REQUIRED = re.compile(r":not\([^)]*\)|::?[\w-]+(\([^)]*\))?")
RUNTIME = "md-"  # Material's scripts add its classes as the page loads (md-typeset__scrollwrap)
NEVER = re.compile(r"\s:root\b")  # `.jupyter-wrapper :root`: the root is inside nothing

_blocks: dict[str, None] = {}  # each style block once, in the order the pages hold them
_classes: set[str] = set()  # every class the notebook pages use


def is_notebook(page) -> bool:
    return page.file.src_uri.endswith(".ipynb")


def on_pre_build(config) -> None:
    _blocks.clear()
    _classes.clear()


def on_page_content(html: str, page, config, files) -> str:
    if not is_notebook(page):
        return html
    for block in STYLE.findall(html):
        if block.lstrip().startswith("['"):  # mkdocs-jupyter also writes its list of CSS as a repr
            block = "\n".join(ast.literal_eval(block.strip()))
        _blocks[block.strip()] = None
    body = STYLE.sub("", html)
    _classes.update(c for value in CLASS_ATTRIBUTE.findall(body) for c in value.split())
    return body


def on_post_page(output: str, page, config) -> str:
    if not is_notebook(page):
        return output
    link = f'<link rel="stylesheet" href="{get_relative_url(STYLESHEET, page.url)}">\n'
    return output.replace("</head>", link + "</head>", 1)


def matches(selector: str) -> bool:
    """The selector can match on a notebook page: each class it needs is there."""
    if NEVER.search(selector):
        return False
    needed = CLASS.findall(NOT_REQUIRED.sub("", selector))
    return all(c in _classes or c.startswith(RUNTIME) for c in needed)


def kept(rules: list) -> list[str]:
    """The rules a notebook page can match (inside @media and @supports too); other at-rules whole."""
    found = []
    for rule in rules:
        if rule.type == "qualified-rule":
            if any(matches(s) for s in tinycss2.serialize(rule.prelude).split(",")):
                found.append(rule.serialize())
        elif rule.type == "at-rule" and rule.lower_at_keyword in ("media", "supports"):
            inner = kept(tinycss2.parse_rule_list(rule.content or [], True, True))
            if inner:
                prelude = tinycss2.serialize(rule.prelude)
                found.append(f"@{rule.at_keyword}{prelude}{{{''.join(inner)}}}")
        elif rule.type == "at-rule" and rule.lower_at_keyword != "charset":
            found.append(rule.serialize())
    return found


def on_post_build(config) -> None:
    if not _blocks:
        return
    rules = [r for b in _blocks for r in kept(tinycss2.parse_stylesheet(b, True, True))]
    out = Path(config.site_dir, STYLESHEET)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text('@charset "UTF-8";\n' + "\n".join(rules) + "\n", encoding="utf-8")
