#!/usr/bin/python3
"""Writes the plugin's documentation, help/index.html: a section per algorithm (anchor: its id with
'-' for ':', where each algorithm's Help button points) holding its help text, its parameters with
their types, defaults and accepted values, and its outputs; then the project's README (design,
implementation notes, tests, performance) turned into HTML.

Runs at build time with Debian's python3 (PyQGIS): it loads the provider library just built, as the
plugin does, and asks QGIS for each algorithm's definitions, so the page says what the code does.
python3-markdown turns the README into HTML (without it the README is shown as text).

usage: make_help.py PROVIDER_LIBRARY README.md OUTPUT.html
"""
import ctypes
import html
import os
import sys
import tempfile


def parameter_rows(algorithm):
    from qgis.core import QgsProcessingParameterDefinition, QgsProcessingParameterNumber

    rows = []
    for p in algorithm.parameterDefinitions():
        if p.flags() & QgsProcessingParameterDefinition.FlagHidden or p.isDestination():
            continue
        notes = []
        if p.flags() & QgsProcessingParameterDefinition.FlagOptional:
            notes.append("optional")
        if p.flags() & QgsProcessingParameterDefinition.FlagAdvanced:
            notes.append("advanced")
        accepted = ""
        if isinstance(p, QgsProcessingParameterNumber):
            low, high = p.minimum(), p.maximum()
            excluded = bool(p.metadata().get("gpugeo/minimumExcluded"))
            parts = []
            if low > -1e300:
                parts.append(f"{'>' if excluded else '≥'} {low:g}")
            if high < 1e300:
                parts.append(f"≤ {high:g}")
            kind = "whole number" if p.dataType() == QgsProcessingParameterNumber.Integer else "number"
            accepted = f"{kind} {', '.join(parts)}" if parts else kind
        elif hasattr(p, "options") and callable(p.options):
            accepted = "; ".join(f"{i}: {html.escape(o)}" for i, o in enumerate(p.options()))
        default = p.defaultValue()
        rows.append("<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>".format(
            html.escape(p.name()), html.escape(p.description()), html.escape(p.type()),
            "" if default is None else html.escape(str(default)), accepted, ", ".join(notes)))
    return rows


def output_rows(algorithm):
    rows = []
    for p in algorithm.destinationParameterDefinitions():
        rows.append("<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>".format(
            html.escape(p.name()), html.escape(p.description()), html.escape(p.type())))
    for o in algorithm.outputDefinitions():
        if algorithm.parameterDefinition(o.name()) is None:
            rows.append("<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>".format(
                html.escape(o.name()), html.escape(o.description()), html.escape(o.type())))
    return rows


def readme_html(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        import markdown
    except ImportError:
        return "<pre>" + html.escape(text) + "</pre>"
    return markdown.markdown(text, extensions=["tables", "fenced_code"])


def main(library, readme, output):
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from qgis.core import QgsApplication

    profile = tempfile.TemporaryDirectory()
    app = QgsApplication([], False, profile.name)
    app.initQgis()
    provider = ctypes.CDLL(library)
    provider.gpugeo_register_provider.restype = ctypes.c_int
    if not provider.gpugeo_register_provider():
        sys.exit("make_help.py: could not register the provider")
    algorithms = sorted(QgsApplication.processingRegistry().providerById("gpugeo").algorithms(),
                        key=lambda a: (a.group(), a.displayName()))
    toc, sections = [], []
    for a in algorithms:
        anchor = a.id().replace(":", "-")
        toc.append(f'<li><a href="#{anchor}">{html.escape(a.displayName())}</a> '
                   f'<code>{a.id()}</code> ({html.escape(a.group())})</li>')
        sections.append(
            f'<section><h2 id="{anchor}">{html.escape(a.displayName())} <code>{a.id()}</code></h2>'
            f"<p><i>{html.escape(a.shortDescription())}</i></p>{a.shortHelpString()}"
            "<h3>Parameters</h3><table><tr><th>Name</th><th>Description</th><th>Type</th><th>Default</th>"
            "<th>Accepted values</th><th></th></tr>" + "".join(parameter_rows(a)) + "</table>"
            "<h3>Outputs</h3><table><tr><th>Name</th><th>Description</th><th>Type</th></tr>"
            + "".join(output_rows(a)) + "</table></section>")
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>GPU Geoprocessing</title><style>"
            "body{font-family:sans-serif;max-width:60em;margin:auto;padding:1em;line-height:1.4}"
            "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 6px;vertical-align:top}"
            "code{background:#f3f3f3}section{border-top:2px solid #888;margin-top:2em}</style></head><body>"
            "<h1>GPU Geoprocessing</h1><p>The algorithms of the <code>gpugeo</code> processing provider, "
            "then the project's notes on its design, methods, tests and performance.</p><ul>"
            + "".join(toc) + '<li><a href="#notes">Design, methods, tests and performance</a></li></ul>'
            + "".join(sections) + '<section><h2 id="notes">Design, methods, tests and performance</h2>'
            + readme_html(readme) + "</section></body></html>")
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        f.write(page)
    provider.gpugeo_unregister_provider()
    app.exitQgis()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
