#!/usr/bin/env python3
"""Runs every shell command the docs show, as a reader pasting it would.

    doc_commands.py --source-dir SRC --build-dir BUILD --work DIR PAGE.md [PAGE.md ...]
    doc_commands.py --list PAGE.md ...       # print the commands, run nothing

The rules (docs/design.md, "The docs' commands"):

- A fenced block tagged ``sh``, ``bash``, ``shell`` or ``console`` is run, and one tagged
  ``python`` (as one script, by the python3 running this check with PYTHONPATH at the build's
  package, as the page's first command sets it); any other block is not.
  A block of another tag (or none) with a line starting ``$ `` is an error: tag it ``console``.
- ``sh``/``bash``/``shell``: every line is a command; a line ending in ``\\`` continues on the
  next; blank lines and ``#`` comment lines are skipped (a trailing ``# ...`` stays: bash
  ignores it).
- ``console``: a line starting ``$ `` is a command (continued as above); the lines up to the next
  command are its output as the page shows it. Each run of shown lines between ``...`` lines must
  appear in the command's stdout, line for line (trailing blanks ignored) and in order, so a
  figure the page quotes is the figure the build prints.
- The commands of a block run one after another in one scratch directory per page, each in its
  own ``bash -o pipefail -c``; ``export NAME=...`` and ``cd DIR`` lines carry over to the block's
  later commands. A command passes when it exits 0 (or the block's ``exit`` marker's status).
- The scratch directory holds symbolic links to the source tree's folders (configs/, bench/,
  examples/, scripts/, ...) and ``build`` to the build directory, so the relative paths the docs
  use resolve; the build's ``bin`` is first on PATH, so bare ``ascendsim`` is the fresh build,
  then the directory of the python3 running this check (Debian's, which the build is for).
  ASCENDSIM_CONFIG_DIR and PYTHONPATH are unset: a page sets what a reader must set.

Markers: HTML comments on the lines just above a block's opening fence (invisible in the
rendered page), one or more, ``<!-- doc-test: ... -->``:

- ``skip: REASON`` — the block is not run (it needs an Ascend host, a cluster, the network, or
  builds the project); the reason is required and printed.
- ``replace: OLD => NEW`` — in the block's commands, OLD becomes NEW (e.g. fewer steps); OLD must
  occur, so a marker cannot go stale. A command changed by a marker has its output not compared.
- ``timeout: SECONDS`` — per command (default 120).
- ``exit: STATUS`` — the status the block's commands are expected to end with (default 0).

A failure names the page, the line and the command, with the exit status and the output's tail.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

RUN_TAGS = {"sh", "bash", "shell", "console", "python"}
PY_END = "ASCENDSIM_DOC_PYTHON_END"
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
DEFAULT_TIMEOUT = 120


class DocError(Exception):
    """A page that breaks the rules (a bad marker, an untagged prompt)."""


class Command:
    def __init__(self, page, line, text, block):
        self.page, self.line, self.text, self.block = page, line, text, block
        self.run_text = text
        self.shown = None  # console output lines, or None

    def where(self):
        return f"{self.page}:{self.line}"


class Block:
    def __init__(self, page, line, tag):
        self.page, self.line, self.tag = page, line, tag
        self.skip = None
        self.replaces = []
        self.timeout = DEFAULT_TIMEOUT
        self.exit = 0
        self.commands = []


def parse_marker(block, text, where):
    key, sep, value = text.partition(":")
    key, value = key.strip(), value.strip()
    if not sep:
        raise DocError(f"{where}: doc-test marker '{text}' has no 'key: value' (skip, replace, timeout, exit)")
    if key == "skip":
        if not value:
            raise DocError(f"{where}: 'doc-test: skip' needs a reason")
        block.skip = value
    elif key == "replace":
        old, arrow, new = value.partition("=>")
        if not arrow or not old.strip():
            raise DocError(f"{where}: 'doc-test: replace' needs 'OLD => NEW', got '{value}'")
        block.replaces.append((old.strip(), new.strip()))
    elif key == "timeout":
        try:
            block.timeout = float(value)
        except ValueError:
            raise DocError(f"{where}: 'doc-test: timeout' needs seconds, got '{value}'")
    elif key == "exit":
        try:
            block.exit = int(value)
        except ValueError:
            raise DocError(f"{where}: 'doc-test: exit' needs a status, got '{value}'")
    else:
        raise DocError(f"{where}: unknown doc-test marker '{key}' (skip, replace, timeout, exit)")


def join_continued(lines, first):
    """Joins lines[first:] ending in a backslash; returns (text, index after the last line)."""
    parts, i = [], first
    while i < len(lines):
        part = lines[i].rstrip()
        if part.endswith("\\"):
            parts.append(part[:-1].rstrip())
            i += 1
            continue
        parts.append(part)
        i += 1
        break
    return " ".join(p.strip() if k else p for k, p in enumerate(parts)), i


def parse_page(path, label):
    """The page's runnable blocks, each with its commands."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, pending, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line)
        if m:
            pending.append((m.group(1), f"{label}:{i + 1}"))
            i += 1
            continue
        f = FENCE.match(line)
        if not f:
            if line.strip() and pending:
                raise DocError(f"{pending[0][1]}: doc-test marker not directly above a fenced block")
            i += 1
            continue
        fence, tag = f.group(2), f.group(3).lower()
        start = i + 1
        end = start
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = lines[start:end]
        if tag not in RUN_TAGS:
            if pending:
                raise DocError(f"{pending[0][1]}: doc-test marker above a '{tag or 'untagged'}' block")
            for k, b in enumerate(body):
                if b.startswith("$ "):
                    raise DocError(f"{label}:{start + k + 1}: a '$ ' prompt in a block tagged "
                                   f"'{tag or '(none)'}': tag the block 'console' so its commands are run")
            i = end + 1
            continue
        block = Block(label, i + 1, tag)
        for text, where in pending:
            parse_marker(block, text, where)
        pending = []
        if tag == "console":
            parse_console(block, body, start, label)
        elif tag == "python":
            if any(b.strip() for b in body):
                code = "\n".join(body)
                cmd = Command(label, start + 1, code, block)
                block.commands.append(cmd)
        else:
            parse_script(block, body, start, label)
        if not block.commands and not block.skip:
            raise DocError(f"{label}:{i + 1}: a '{tag}' block without a command")
        apply_replaces(block)
        blocks.append(block)
        i = end + 1
    if pending:
        raise DocError(f"{pending[0][1]}: doc-test marker at the end of the page, above no block")
    return blocks


def parse_script(block, body, start, label):
    k = 0
    while k < len(body):
        s = body[k].strip()
        if not s or s.startswith("#"):
            k += 1
            continue
        text, nxt = join_continued(body, k)
        block.commands.append(Command(label, start + k + 1, text.strip(), block))
        k = nxt


def parse_console(block, body, start, label):
    k, cmd = 0, None
    while k < len(body):
        if body[k].startswith("$ "):
            text, nxt = join_continued([body[k][2:]] + body[k + 1:], 0)
            cmd = Command(label, start + k + 1, text.strip(), block)
            cmd.shown = []
            block.commands.append(cmd)
            k += nxt
            continue
        if cmd is None:
            if body[k].strip():
                raise DocError(f"{label}:{start + k + 1}: a console block's output before its first '$ ' command")
        else:
            cmd.shown.append(body[k].rstrip())
        k += 1


def apply_replaces(block):
    for old, new in block.replaces:
        hit = False
        for c in block.commands:
            if old in c.run_text:
                c.run_text = c.run_text.replace(old, new)
                hit = True
        if not hit:
            raise DocError(f"{block.page}:{block.line}: 'doc-test: replace {old} => {new}' matches no "
                           f"command of the block below it")
    if block.tag == "python":  # the script, fed to the interpreter on its standard input
        for c in block.commands:
            c.run_text = (f'PYTHONPATH="$PWD/build/python" "{sys.executable}" - <<\'{PY_END}\'\n'
                          f"{c.run_text}\n{PY_END}")


def shown_mismatch(shown, stdout):
    """None if the shown output lines are in stdout as the rules say; else what is missing."""
    shown = [l.rstrip() for l in shown]
    while shown and not shown[-1].strip():
        shown.pop()
    if not shown:
        return None
    actual = [l.rstrip() for l in stdout.split("\n")]
    chunks, cur = [], []
    for l in shown:
        if l.strip() == "...":
            if cur:
                chunks.append(cur)
            cur = []
        else:
            cur.append(l)
    if cur:
        chunks.append(cur)
    pos = 0
    for chunk in chunks:
        n = len(chunk)
        found = next((p for p in range(pos, len(actual) - n + 1) if actual[p:p + n] == chunk), None)
        if found is None:
            # the first line of the chunk the output does not have, for the message
            for l in chunk:
                if l not in actual[pos:]:
                    return f"the page shows\n    {l}\nwhich the output does not have (after line {pos})"
            return "the page shows these lines together, the output does not:\n    " + "\n    ".join(chunk)
        pos = found + n
    return None


def make_scratch(work, source_dir, build_dir):
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    for name in sorted(os.listdir(source_dir)):
        if name.startswith(".") or name.startswith("build"):
            continue
        os.symlink(os.path.join(source_dir, name), os.path.join(work, name))
    os.symlink(build_dir, os.path.join(work, "build"))


def tail(text, n=15):
    lines = text.rstrip("\n").split("\n")
    return "\n".join("    | " + l for l in lines[-n:])


def run_command(script, cwd, env, timeout):
    """(exit status or None on timeout, stdout, stderr); a timeout kills the command's whole
    process group, so nothing it started outlives it."""
    p = subprocess.Popen(["bash", "-o", "pipefail", "-c", script], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err


def run_page(page, label, args):
    blocks = parse_page(page, label)
    work = os.path.join(args.work, re.sub(r"[^\w.-]", "_", label))
    make_scratch(work, args.source_dir, args.build_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("ASCENDSIM_CONFIG_DIR", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([os.path.join(args.build_dir, "bin"), os.path.dirname(sys.executable),
                                   env.get("PATH", "/usr/bin:/bin")])
    env["MPLBACKEND"] = "Agg"
    failures, ran, skipped = [], 0, 0
    for block in blocks:
        if block.skip:
            skipped += len(block.commands)
            print(f"skip {block.page}:{block.line} ({len(block.commands)} command(s)): {block.skip}")
            continue
        prelude = []
        for c in block.commands:
            script = "\n".join(prelude + [c.run_text])
            t0 = time.monotonic()
            status, out, err = run_command(script, work, env, block.timeout)
            secs = time.monotonic() - t0
            ran += 1
            shown = c.run_text if c.run_text == c.text else f"{c.text}\n    run as: {c.run_text}"
            problem = None
            if status is None:
                problem = f"did not finish within {block.timeout:g} s (a 'doc-test: replace' marker can shrink it)"
            elif status != block.exit:
                problem = f"exit status {status}, expected {block.exit}"
            elif c.shown is not None and c.run_text == c.text:
                problem = shown_mismatch(list(c.shown), out)
            print(f"{'ok  ' if problem is None else 'FAIL'} {c.where()} ({secs:.1f} s): {c.run_text}")
            if problem is not None:
                failures.append(f"{c.where()}: {shown}\n  {problem}\n  stdout:\n{tail(out)}\n  stderr:\n{tail(err)}")
            if re.match(r"^(export\s+\w+=|cd\s)", c.run_text):
                prelude.append(c.run_text)
    return ran, skipped, failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--source-dir")
    ap.add_argument("--build-dir")
    ap.add_argument("--work")
    ap.add_argument("--list", action="store_true", help="print the commands (as run) and exit")
    args = ap.parse_args(argv)
    try:
        if args.list:
            for page in args.pages:
                for b in parse_page(page, os.path.basename(page)):
                    for c in b.commands:
                        print(f"{c.where()}\t{'skip' if b.skip else b.tag}\t{c.run_text}")
            return 0
        if not (args.source_dir and args.build_dir and args.work):
            ap.error("--source-dir, --build-dir and --work are needed to run the commands")
        args.source_dir, args.build_dir = os.path.abspath(args.source_dir), os.path.abspath(args.build_dir)
        args.work = os.path.abspath(args.work)
        total_ran, total_skipped, failures = 0, 0, []
        for page in args.pages:
            label = os.path.relpath(os.path.abspath(page), args.source_dir)
            ran, skipped, fails = run_page(page, label, args)
            total_ran += ran
            total_skipped += skipped
            failures += fails
    except DocError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{total_ran} command(s) run, {len(failures)} failed, {total_skipped} skipped by marker")
    if failures:
        print("\n" + "\n\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
