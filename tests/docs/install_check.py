#!/usr/bin/env python3
"""`cmake --install BUILD --prefix P` gives a working ascendsim outside the source tree.

    install_check.py SOURCE_DIR BUILD_DIR WORK_DIR [CMAKE]

Installs twice, into WORK_DIR/pfx (a prefix python3 does not search) and into WORK_DIR/home/.local
with HOME=WORK_DIR/home (the user's prefix), and checks from fresh environments (no
ASCENDSIM_CONFIG_DIR, cwd /):
- the layout: bin/ascendsim, share/ascendsim/configs with the source tree's presets, the package
  (Python files and extension) in PREFIX/lib/python3/dist-packages, or for ~/.local in python3's
  user site, where `import ascendsim` works with no PYTHONPATH;
- the installed binary and module read the installed presets: a preset added there is listed by
  both, and not by the build tree's binary (which reads the source tree's); ASCENDSIM_CONFIG_DIR
  still overrides;
- the installed binary's report equals the build tree's byte for byte.
"""
import filecmp
import glob
import json
import os
import re
import shutil
import subprocess
import sys

PYTHON = sys.executable
CMAKE = sys.argv[4] if len(sys.argv) > 4 else "cmake"


def run(cmd, env, cwd="/", check=True):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def fresh_env(home, path_first):
    return {"HOME": home, "PATH": os.pathsep.join([path_first, os.path.dirname(PYTHON), "/usr/bin", "/bin"]),
            "LANG": "C.UTF-8"}


def add_preset(config_dir, name, source_dir):
    text = open(os.path.join(source_dir, "configs", "chips", "ascend910.yaml")).read()
    text, n = re.subn(r"(?m)^(\s*name:\s*).*$", r"\g<1>" + name, text, count=1)
    assert n == 1, "ascend910.yaml has no name: line to rename"
    with open(os.path.join(config_dir, "chips", name + ".yaml"), "w") as f:
        f.write(text)


def chips_of(binary, env):
    return [line.split()[0] for line in run([binary, "chips"], env).stdout.splitlines() if line.strip()]


def module_chips(env):
    code = "import ascendsim, json; print(json.dumps([ascendsim.__file__, sorted(ascendsim.chips())]))"
    return json.loads(run([PYTHON, "-c", code], env).stdout)


def check_prefix(source_dir, build_dir, prefix, home, site_dir, expect_note):
    env = fresh_env(home, os.path.join(prefix, "bin"))
    p = run([CMAKE, "--install", build_dir, "--prefix", prefix], env)
    note = "export PYTHONPATH=" + site_dir
    assert (note in p.stdout) == expect_note, f"install's PYTHONPATH note (wanted: {expect_note}):\n{p.stdout}"

    binary = os.path.join(prefix, "bin", "ascendsim")
    assert os.access(binary, os.X_OK), f"no executable {binary}"
    config_dir = os.path.join(prefix, "share", "ascendsim", "configs")
    cmp = filecmp.dircmp(os.path.join(source_dir, "configs"), config_dir)
    assert not cmp.left_only and not cmp.diff_files, f"installed presets differ: {cmp.left_only} {cmp.diff_files}"
    assert not cmp.subdirs["chips"].left_only and not cmp.subdirs["chips"].diff_files
    pkg = os.path.join(site_dir, "ascendsim")
    for name in os.listdir(os.path.join(source_dir, "python", "ascendsim")):
        assert filecmp.cmp(os.path.join(source_dir, "python", "ascendsim", name), os.path.join(pkg, name), shallow=False), name
    assert glob.glob(os.path.join(pkg, "_ascendsim*.so")), f"no extension module in {pkg}"

    # The installed copies read the installed presets, the build tree's binary the source tree's.
    add_preset(config_dir, "zz_installed", source_dir)
    assert "zz_installed" in chips_of(binary, env)
    assert "zz_installed" not in chips_of(os.path.join(build_dir, "bin", "ascendsim"), env)
    mod_env = dict(env)
    if expect_note:
        mod_env["PYTHONPATH"] = site_dir
    where, chips = module_chips(mod_env)
    assert os.path.realpath(where).startswith(os.path.realpath(pkg)), f"imported {where}, not the installed {pkg}"
    assert "zz_installed" in chips, chips
    over = dict(env, ASCENDSIM_CONFIG_DIR=os.path.join(source_dir, "configs"))
    assert "zz_installed" not in chips_of(binary, over), "ASCENDSIM_CONFIG_DIR no longer overrides"
    os.remove(os.path.join(config_dir, "chips", "zz_installed.yaml"))
    return binary, env


def main():
    source_dir, build_dir, work = (os.path.abspath(a) for a in sys.argv[1:4])
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    home = os.path.join(work, "home")
    os.makedirs(home)

    # A prefix python3 does not search: the package goes to PREFIX/lib/python3/dist-packages.
    prefix = os.path.join(work, "pfx")
    check_prefix(source_dir, build_dir, prefix, home, os.path.join(prefix, "lib", "python3", "dist-packages"), True)

    # ~/.local: python3's user site, imported with no PYTHONPATH.
    user_site = run([PYTHON, "-c", "import site; print(site.getusersitepackages())"],
                    fresh_env(home, "/usr/bin")).stdout.strip()
    assert user_site.startswith(os.path.join(home, ".local") + os.sep), user_site
    binary, env = check_prefix(source_dir, build_dir, os.path.join(home, ".local"), home, user_site, False)

    # Same inputs, same report: the installed binary and the build tree's.
    reports = []
    for b in (binary, os.path.join(build_dir, "bin", "ascendsim")):
        out = os.path.join(work, f"r{len(reports)}.json")
        run([b, "compare", "--workload", "lenet5", "--steps-per-epoch", "50", "--json", out], env)
        reports.append(open(out, "rb").read())
    assert reports[0] == reports[1], "the installed binary's report differs from the build tree's"
    print("install: layout, presets, package and report checked for a plain prefix and ~/.local")


if __name__ == "__main__":
    main()
