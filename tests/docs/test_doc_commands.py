"""The doc-commands checker's rules, on small pages: what it runs, what it compares, what it
rejects, and that a failure names page, line and command."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import doc_commands as dc  # noqa: E402


def page(tmp_path, text, name="page.md"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_script_lines_continuations_comments_and_markers(tmp_path):
    blocks = dc.parse_page(page(tmp_path, """Intro.

<!-- doc-test: replace: --epochs 10 => --epochs 1 -->
<!-- doc-test: timeout: 5 -->
```sh
# a comment line
ascendsim compare --epochs 10 \\
    --json r.json   # a trailing comment stays

ascendsim chips
```

```python
$ not run: a python block
```
```text
$ not run: a text block
```
""".replace("$ not run: a python block", "print('run as one script')").replace("$ not run: a text block", "x")),
        "page.md")
    assert len(blocks) == 2
    assert blocks[1].tag == "python" and len(blocks[1].commands) == 1
    assert "print('run as one script')" in blocks[1].commands[0].run_text
    b = blocks[0]
    assert b.timeout == 5 and b.line == 5
    assert [c.text for c in b.commands] == ["ascendsim compare --epochs 10 --json r.json   # a trailing comment stays",
                                           "ascendsim chips"]
    assert [c.line for c in b.commands] == [7, 10]
    assert b.commands[0].run_text == "ascendsim compare --epochs 1 --json r.json   # a trailing comment stays"
    assert b.commands[1].run_text == b.commands[1].text


def test_console_commands_and_shown_output(tmp_path):
    (b,) = dc.parse_page(page(tmp_path, """```console
$ echo a
a
$ printf 'x\\ny\\n' \\
  | cat
x
...
```
"""), "p.md")
    assert [c.text for c in b.commands] == ["echo a", "printf 'x\\ny\\n' | cat"]
    assert b.commands[0].shown == ["a"]
    assert b.commands[1].shown == ["x", "..."]


def test_shown_output_must_be_in_the_output_in_order():
    out = "head\nrow 1  10.0\nrow 2  20.0\n\ntotal 30\n"
    assert dc.shown_mismatch(["head", "...", "total 30"], out) is None
    assert dc.shown_mismatch(["row 1  10.0", "row 2  20.0"], out) is None
    assert dc.shown_mismatch(["head   "], out) is None  # trailing blanks do not count
    # a figure that moved, lines out of order, lines shown together that are apart
    assert "row 2  21.0" in dc.shown_mismatch(["row 2  21.0"], out)
    assert dc.shown_mismatch(["total 30", "...", "head"], out) is not None
    assert dc.shown_mismatch(["head", "row 2  20.0"], out) is not None


@pytest.mark.parametrize("text, message", [
    ("```\n$ ascendsim chips\n```\n", "tag the block 'console'"),
    ("<!-- doc-test: skip: -->\n```sh\nls\n```\n", "needs a reason"),
    ("<!-- doc-test: replace: --epochs 9 => --epochs 1 -->\n```sh\nascendsim compare --epochs 10\n```\n",
     "matches no command"),
    ("<!-- doc-test: frobnicate: 1 -->\n```sh\nls\n```\n", "unknown doc-test marker"),
    ("<!-- doc-test: skip: x -->\nSome prose.\n```sh\nls\n```\n", "not directly above a fenced block"),
    ("<!-- doc-test: skip: x -->\n```json\n{}\n```\n", "above a 'json' block"),
    ("```console\noutput first\n$ ls\n```\n", "output before its first"),
])
def test_pages_breaking_the_rules_are_refused(tmp_path, text, message):
    with pytest.raises(dc.DocError, match=message):
        dc.parse_page(page(tmp_path, text), "p.md")


def test_a_run_names_page_line_and_command_of_each_failure(tmp_path, capsys):
    src = tmp_path / "src"
    (src / "configs").mkdir(parents=True)
    (src / "configs" / "host.yaml").write_text("x: 1\n")
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    tool = build / "bin" / "ascendsim"
    tool.write_text("#!/bin/sh\necho \"fake $*\"\n")
    tool.chmod(0o755)
    doc = page(src, """# Page

```sh
export GREETING=hello
test "$GREETING" = hello            # exports carry over within a block
test -f configs/host.yaml           # the source tree's folders resolve
ascendsim chips | grep -q 'fake chips'   # the build's bin comes first on PATH
test -z "$ASCENDSIM_CONFIG_DIR"
false
```

<!-- doc-test: skip: needs a cluster -->
```sh
exit 1
```

```console
$ ascendsim compare
fake compare
$ ascendsim train
fake compare
```

<!-- doc-test: exit: 3 -->
```sh
sh -c 'exit 3'
```
""", "page.md")
    os.environ["ASCENDSIM_CONFIG_DIR"] = "/nonexistent"
    try:
        status = dc.main([doc, "--source-dir", str(src), "--build-dir", str(build), "--work", str(tmp_path / "w")])
    finally:
        del os.environ["ASCENDSIM_CONFIG_DIR"]
    out, err = capsys.readouterr()
    assert status == 1
    assert "9 command(s) run, 2 failed, 1 skipped by marker" in out
    assert "page.md:9: false\n  exit status 1, expected 0" in err
    assert "page.md:20: ascendsim train\n  the page shows\n    fake compare" in err
    assert "skip page.md:13 (1 command(s)): needs a cluster" in out


def test_a_python_block_runs_as_one_script_with_the_builds_package(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    build = tmp_path / "build"
    (build / "python" / "mypkg").mkdir(parents=True)
    (build / "python" / "mypkg" / "__init__.py").write_text("VALUE = 7\n")
    doc = page(src, """```python
import mypkg

total = mypkg.VALUE * 6
assert total == 42, total
```

<!-- doc-test: replace: == 42 => == 43 -->
```python
import mypkg
assert mypkg.VALUE * 6 == 42
```
""", "page.md")
    status = dc.main([doc, "--source-dir", str(src), "--build-dir", str(build), "--work", str(tmp_path / "w")])
    out, err = capsys.readouterr()
    assert status == 1
    assert "2 command(s) run, 1 failed" in out
    assert "page.md:10:" in err and "AssertionError" in err


def test_a_command_past_its_timeout_fails_and_is_killed(tmp_path, capsys):
    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (build / "bin").mkdir(parents=True)
    doc = page(src, "<!-- doc-test: timeout: 0.5 -->\n```sh\nsleep 30 | cat\n```\n", "slow.md")
    status = dc.main([doc, "--source-dir", str(src), "--build-dir", str(build), "--work", str(tmp_path / "w")])
    out, err = capsys.readouterr()
    assert status == 1
    assert "slow.md:3: sleep 30 | cat\n  did not finish within 0.5 s" in err
