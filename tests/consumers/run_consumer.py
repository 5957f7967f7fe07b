#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds and runs a consumer project against dtr, as a test of dtr's packaging.

usage: run_consumer.py MODE --meson CMD --source-root DIR --build-root DIR --work DIR --cxx CMD...
  MODE meson-subproject  tests/consumers/meson with subprojects/dtr -> the source tree; checks
                         that the parent gets no target, test or installed file of dtr's
  MODE pkg-config        `meson install --tags devel --destdir` into WORK, then compiles
                         program.cpp with `pkg-config --cflags dtr` (no -std in them)
  MODE cmake             the same tree, tests/consumers/cmake with find_package(dtr)

Each compiles tests/consumers/program.cpp with -Wall -Wextra -Wpedantic -Wshadow -Wconversion
-Wfloat-equal -Werror and runs it. dtr's headers do warn under -Wfloat-equal when included with
a plain -I (the pkg-config mode shows it with a control build that must fail), so a pass means
they reached the consumer as system headers. Exit 0: pass; 1: fail; 77: skipped (a tool the
mode needs is missing).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

STRICT = ["-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wconversion", "-Wfloat-equal", "-Werror"]
SKIP = 77


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def install_tree(args):
    """dtr's devel files installed under WORK/stage; returns (stage, prefix inside it)."""
    stage = fresh(os.path.join(args.work, "stage"))
    run(args.meson + ["install", "-C", args.build_root, "--no-rebuild", "--quiet",
         "--tags", "devel", "--destdir", stage])
    info = json.loads(subprocess.run(args.meson + ["introspect", "--buildoptions", args.build_root],
                                     check=True, capture_output=True, text=True).stdout)
    opts = {o["name"]: o["value"] for o in info}
    prefix = stage + opts["prefix"]
    for path in [os.path.join(prefix, opts["includedir"], "dtr", "runtime.hpp"),
                 os.path.join(prefix, opts["datadir"], "pkgconfig", "dtr.pc"),
                 os.path.join(prefix, opts["datadir"], "cmake", "dtr", "dtrConfig.cmake"),
                 os.path.join(prefix, opts["datadir"], "cmake", "dtr", "dtrConfigVersion.cmake")]:
        if not os.path.isfile(path):
            fail(f"meson install did not install {os.path.relpath(path, stage)}")
    for gone in ["replay", "graph", os.path.join("detail", "json.hpp")]:
        if os.path.exists(os.path.join(prefix, opts["includedir"], "dtr", gone)):
            fail(f"the tools' internal headers are installed as dtr/{gone}")
    return stage, prefix, opts


def mode_pkg_config(args):
    if shutil.which("pkg-config") is None:
        print("skipped: pkg-config not found")
        return SKIP
    stage, prefix, opts = install_tree(args)
    env = dict(os.environ,
               PKG_CONFIG_PATH=os.path.join(prefix, opts["datadir"], "pkgconfig"),
               PKG_CONFIG_SYSROOT_DIR=stage)
    env.pop("PKG_CONFIG_LIBDIR", None)
    cflags = subprocess.run(["pkg-config", "--cflags", "dtr"], env=env, check=True,
                            capture_output=True, text=True).stdout.split()
    print("pkg-config --cflags dtr: " + " ".join(cflags))
    if any(f.startswith("-std") for f in cflags):
        fail("dtr.pc imposes a language standard")
    if "-isystem" not in cflags:
        fail("dtr.pc does not give dtr's headers as system headers")
    exe = os.path.join(fresh(os.path.join(args.work, "out")), "consumer")
    source = os.path.join(args.source_root, "tests", "consumers", "program.cpp")
    run(args.cxx + ["-std=c++20"] + STRICT + cflags + [source, "-o", exe])
    run([exe])
    # Control: the same flags with dtr's directory as a plain -I must fail, or the pass above
    # shows nothing. (Should dtr's headers ever compile clean under these flags, say so.)
    plain = [f for f in cflags if f != "-isystem"]
    plain = [("-I" + f) if not f.startswith("-") else f for f in plain]
    control = subprocess.run(args.cxx + ["-std=c++20", "-fsyntax-only"] + STRICT + plain + [source],
                             capture_output=True, text=True)
    if control.returncode == 0:
        print("note: with a plain -I dtr's headers compile clean under these flags too; "
              "the -isystem check shows nothing more")
    else:
        print("control with a plain -I fails as expected: "
              + next((l for l in control.stderr.splitlines() if "error:" in l), "?"))
    return 0


def mode_cmake(args):
    if shutil.which("cmake") is None:
        print("skipped: cmake not found")
        return SKIP
    stage, prefix, _ = install_tree(args)
    src = os.path.join(args.source_root, "tests", "consumers", "cmake")
    build = fresh(os.path.join(args.work, "cmake-build"))
    configure = ["cmake", "-S", src, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix,
                 "-DCMAKE_CXX_COMPILER=" + args.cxx[0], "-DCMAKE_BUILD_TYPE=Release"]
    if len(args.cxx) > 1:  # e.g. ccache c++
        configure = ["cmake", "-S", src, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix,
                     "-DCMAKE_CXX_COMPILER_LAUNCHER=" + args.cxx[0],
                     "-DCMAKE_CXX_COMPILER=" + args.cxx[-1], "-DCMAKE_BUILD_TYPE=Release"]
    run(configure)
    run(["cmake", "--build", build, "--verbose"])
    run([os.path.join(build, "consumer")])
    # The version file: a later minor series is refused.
    refused = subprocess.run(["cmake", "-S", src, "-B", fresh(os.path.join(args.work, "cmake-v")),
                              "-DCMAKE_PREFIX_PATH=" + prefix, "-DDTR_CONSUMER_WANT_VERSION=0.99"],
                             capture_output=True, text=True)
    if refused.returncode == 0:
        fail("find_package(dtr 0.99) accepted version " + _version(args))
    print("find_package(dtr 0.99) refused, as it should be")
    return 0


def _version(args):
    info = json.loads(subprocess.run(args.meson + ["introspect", "--projectinfo", args.build_root],
                                     check=True, capture_output=True, text=True).stdout)
    return info["version"]


def mode_meson_subproject(args):
    proj = fresh(os.path.join(args.work, "project"))
    consumers = os.path.join(args.source_root, "tests", "consumers")
    shutil.copy(os.path.join(consumers, "meson", "meson.build"), proj)
    shutil.copy(os.path.join(consumers, "program.cpp"), proj)
    os.makedirs(os.path.join(proj, "subprojects"))
    os.symlink(os.path.abspath(args.source_root), os.path.join(proj, "subprojects", "dtr"))
    build = os.path.join(args.work, "build")
    shutil.rmtree(build, ignore_errors=True)
    env = dict(os.environ, CXX=" ".join(args.cxx))
    run(args.meson + ["setup", build, proj, "--force-fallback-for=dtr", "--prefix=/usr/local"], env=env)

    def introspect(what):
        return json.loads(subprocess.run(args.meson + ["introspect", what, build], check=True,
                                         capture_output=True, text=True).stdout)

    ours = [t["name"] for t in introspect("--targets") if t.get("subproject") == "dtr"]
    if ours:
        fail(f"the parent project gets dtr's targets: {ours}")
    tests = [t["name"] for t in introspect("--tests")] + [t["name"] for t in introspect("--benchmarks")]
    if tests:
        fail(f"the parent project's meson test gets: {tests}")
    installed = list(introspect("--installed").values())
    if installed != ["/usr/local/bin/consumer"]:
        fail(f"the parent project's meson install would install {installed}")
    run(args.meson + ["compile", "-C", build])
    run([os.path.join(build, "consumer")])
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["meson-subproject", "pkg-config", "cmake"])
    parser.add_argument("--meson", required=True, nargs="+")
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--build-root", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--cxx", required=True, nargs="+")
    args = parser.parse_args()
    try:
        return {"meson-subproject": mode_meson_subproject, "pkg-config": mode_pkg_config,
                "cmake": mode_cmake}[args.mode](args)
    except subprocess.CalledProcessError as e:
        fail(f"command failed ({e.returncode}): {' '.join(map(str, e.cmd))}")


if __name__ == "__main__":
    sys.exit(main())
