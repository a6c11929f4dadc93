"""MkDocs hook: the API reference page's entries, from the package's own list of public names.

``tfrecorder._LAZY`` names each public function and class and the module it lives in; the reference page
(docs/reference.md) holds a placeholder that becomes a mkdocstrings entry per name, so a new public name
appears in the docs without a list kept here.
"""

from __future__ import annotations

import inspect

PLACEHOLDER = "<!-- api -->"
TYPES_PLACEHOLDER = "<!-- column types -->"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - MkDocs' hook signature
    if PLACEHOLDER not in markdown and TYPES_PLACEHOLDER not in markdown:
        return markdown
    import tfrecorder
    from tfrecorder import types

    entries = ["::: tfrecorder.accessor.TensorflowAccessor.to_tfr"]
    entries += [f"::: {module}.{name}" for name, module in tfrecorder._LAZY.items()]
    entries += [f"::: tfrecorder.{name}" for name in ("schema.Schema", "errors.TFRecorderError",
                                                     "errors.SchemaError", "errors.RowError")]
    entries.append("::: tfrecorder.write.runners.beam.WriteDataset")
    entries += [f"::: tfrecorder.torch.{name}" for name in ("Dataset", "Sampler")]
    rows = "\n".join(f"| `types.{t.__name__}` | {t.role.value} | {t.kind.value}{'[]' if t.is_list else ''} | "
                     f"{(inspect.getdoc(t) or '').replace(chr(10), ' ')} |" for t in types.ALL_TYPES)
    table = f"| type | role | stored as | meaning |\n|---|---|---|---|\n{rows}\n"
    return markdown.replace(PLACEHOLDER, "\n\n".join(entries)).replace(TYPES_PLACEHOLDER, table)
