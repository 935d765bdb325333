"""The PEP 517 build backend of the cuckoofilter package (pyproject.toml names it).

build_wheel runs the project's CMake for the Python that calls it (the same target,
cuckoofilter_python, that `make` builds; in a fresh build directory, or in the one
CUCKOOFILTER_CMAKE_BUILD_DIR names) and packs the package directory it assembles
into a wheel: the extension, __init__.py, the type stubs and py.typed. Standard library
only, so that `pip install --no-build-isolation ./python` works offline in any
virtualenv. The version is the C library's, read from its header.
"""

import base64
import glob
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NAME = "cuckoofilter"
# Added to the package directory that CMake assembles; anything else there is not shipped.
PACKAGE_FILES = ("__init__.py", "__init__.pyi", "py.typed", "dask.py")
# A CMake build directory of this source to build the extension in, instead of a fresh one
# (debian/rules names its own, which has compiled the library already).
REUSE_ENV = "CUCKOOFILTER_CMAKE_BUILD_DIR"


def _version():
    with open(os.path.join(ROOT, "include", "cuckoofilter.h"), encoding="utf-8") as f:
        text = f.read()
    return ".".join(re.search(r"#define CF_VERSION_%s\s+(\d+)" % part, text).group(1)
                    for part in ("MAJOR", "MINOR", "PATCH"))


def _tag():
    """The wheel's tag for this interpreter: cpXY-cpXY-<platform>."""
    impl = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: Cuckoo filters: set membership with deletion and a tunable "
            "false-positive rate\nLicense: MIT\nRequires-Python: >=3.10\n")


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _build_extension(work):
    build = os.environ.get(REUSE_ENV)
    if build:
        # Only the interpreter is set: the build's own type and flags stay, so the library
        # it already compiled is not compiled again.
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCF_BUILD_PYTHON=ON",
                        f"-DPython3_EXECUTABLE={sys.executable}"], check=True, stdout=sys.stderr)
    else:
        build = os.path.join(work, "cmake")
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                        f"-DPython3_EXECUTABLE={sys.executable}", "-DCF_BUILD_TESTS=OFF",
                        "-DCF_BUILD_BENCH=OFF", "-DCF_BUILD_CLI=OFF", "-DCF_BUILD_REDIS=OFF",
                        "-DCF_BUILD_EXAMPLES=OFF"], check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build, "--target", "cuckoofilter_python", "--parallel",
                    str(os.cpu_count() or 1)], check=True, stdout=sys.stderr)
    package = os.path.join(build, "python", NAME)
    built = glob.glob(os.path.join(package, "_cuckoofilter*.so"))
    if len(built) != 1:
        raise RuntimeError(f"{NAME}: expected one extension in {package}, found {built}")
    return [os.path.join(package, f) for f in PACKAGE_FILES] + built


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{_version()}-{_tag()}.whl"
    with tempfile.TemporaryDirectory(prefix="cuckoofilter-build-") as work:
        files = _build_extension(work)
        records = []
        path = os.path.join(wheel_directory, name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            def put(arcname, data):
                z.writestr(arcname, data)
                records.append(_record_line(arcname, data))

            for src in files:
                with open(src, "rb") as f:
                    put(f"{NAME}/{os.path.basename(src)}", f.read())
            info = _dist_info()
            put(f"{info}/METADATA", _metadata().encode())
            put(f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: {NAME} build_backend\n"
                                  f"Root-Is-Purelib: false\nTag: {_tag()}\n").encode())
            put(f"{info}/top_level.txt", f"{NAME}\n".encode())
            records.append(f"{info}/RECORD,,")
            z.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return name
