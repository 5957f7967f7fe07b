# SPDX-License-Identifier: Apache-2.0
"""Builds the bridge's C++ extension (dtr_torch._dtr_torch) for `pip install`, with PyTorch's
own extension builder, against the installed torch. The Meson build (examples/torch/meson.build)
builds the same sources; both take every .cpp under csrc/.

Headers it needs besides torch's: dtr's (include/ of this repository, two folders up) and
Boost's (Boost.Intrusive and Boost.Heap; found on the compiler's default path, e.g. Debian's
libboost-dev, or in $BOOST_INCLUDEDIR). MAX_JOBS sets the parallel compile jobs."""

import glob
import os
import sys

from setuptools import setup

try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit("dtr-torch: building it needs torch installed first (pip install --no-build-isolation "
             "builds against the torch already there)")

here = os.path.dirname(os.path.abspath(__file__))
dtr_include = os.path.normpath(os.path.join(here, "..", "..", "include"))
if not os.path.isfile(os.path.join(dtr_include, "dtr", "runtime.hpp")):
    sys.exit(f"dtr-torch: dtr's headers are not at {dtr_include}: install from a checkout of the "
             "dtr repository (pip install ./examples/torch)")
include_dirs = [dtr_include]
boost = os.environ.get("BOOST_INCLUDEDIR")
if boost:
    if not os.path.isfile(os.path.join(boost, "boost", "version.hpp")):
        sys.exit(f"dtr-torch: BOOST_INCLUDEDIR={boost} holds no boost/version.hpp")
    include_dirs.append(boost)

sources = sorted(os.path.relpath(p, here) for p in glob.glob(os.path.join(here, "csrc", "*.cpp")))

setup(
    ext_modules=[CppExtension(
        "dtr_torch._dtr_torch",
        sources,
        include_dirs=include_dirs,
        # C++20 after torch's own -std flag, which it overrides; libtorch's headers are not
        # clean at the warning levels the project builds itself with.
        extra_compile_args=["-std=c++20", "-O2", "-Wno-unused-parameter", "-Wno-deprecated-declarations"],
    )],
    cmdclass={"build_ext": BuildExtension},
)
