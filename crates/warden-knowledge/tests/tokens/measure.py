"""Reference token counts for the estimator's error test (tests/tokens.rs).

Counts every sample with cl100k_base and o200k_base, using a tiktoken-compatible tokenizer
(`pip install bpe-openai`, which ships the vocabularies), and writes reference.toml. Run from
this folder after changing a sample or the example notes:

    python3 measure.py > reference.toml

The `sample-*.txt` files are frozen copies (of a Rust module, the example sources file, a
session trace, and text in other languages): they are data for this measurement only.
"""
import glob
import os

import bpe_openai

HERE = os.path.dirname(os.path.abspath(__file__))
NOTES = os.path.join(HERE, "..", "..", "..", "..", "examples", "knowledge", "notes")
ENCODINGS = ["cl100k_base", "o200k_base"]

def samples():
    for path in sorted(glob.glob(os.path.join(NOTES, "*.md"))):
        yield "examples/knowledge/notes/" + os.path.basename(path), path
    for path in sorted(glob.glob(os.path.join(HERE, "sample-*.txt"))):
        yield "tests/tokens/" + os.path.basename(path), path

encoders = {name: bpe_openai.get_encoding(name) for name in ENCODINGS}
print("# Made by measure.py; do not edit by hand.")
for name, path in samples():
    text = open(path, encoding="utf-8").read()
    print()
    print("[[sample]]")
    print(f'file = "{name}"')
    for enc in ENCODINGS:
        print(f"{enc} = {len(encoders[enc].encode(text, disallowed_special=()))}")
