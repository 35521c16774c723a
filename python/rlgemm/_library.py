"""librlgemm through ctypes: finding the shared library, its C API (include/rlgemm/rlgemm_c.h), and errors.

The library is looked for, in order:
  1. $RLGEMM_LIBRARY (a path to librlgemm.so);
  2. librlgemm.so next to this package (a copy placed there by hand or by a packaging step);
  3. the build trees of the source checkout this package sits in: <repo>/build/librlgemm.so, then any
     <repo>/build-*/librlgemm.so;
  4. the system's library path (ldconfig, LD_LIBRARY_PATH), e.g. after `cmake --install build --prefix /usr/local`.
"""
import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

# Status codes: the process exit codes of the error kinds (include/rlgemm/error.h).
OK = 0
ERROR_RUNTIME = 1
ERROR_INVALID_INPUT = 2
ERROR_NO_DEVICE = 3
ERROR_OUT_OF_MEMORY = 4

LAYOUT_NN = 0
LAYOUT_TN = 1
DTYPE_FP16 = 0  # RLGEMM_DTYPE_FP16
DTYPE_BF16 = 1  # RLGEMM_DTYPE_BF16


class RlgemmError(RuntimeError):
    """A failure reported by librlgemm; `status` is its code (2 bad input, 3 no GPU, 4 out of memory, 1 other)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class LibraryNotFound(RlgemmError):
    def __init__(self, message):
        super().__init__(ERROR_RUNTIME, message)


class Stats(ctypes.Structure):
    _fields_ = [("tuned", ctypes.c_uint64), ("nearest", ctypes.c_uint64), ("policy", ctypes.c_uint64),
                ("default_design", ctypes.c_uint64), ("cublaslt", ctypes.c_uint64),
                ("predicted", ctypes.c_uint64)]

    def as_dict(self):
        return {name: int(getattr(self, name)) for name, _ in self._fields_}


class Options(ctypes.Structure):
    """rlgemm_options_t (include/rlgemm/rlgemm_c.h)."""
    _fields_ = [("database", ctypes.c_char_p), ("tuned_table", ctypes.c_char_p), ("policy", ctypes.c_char_p),
                ("cache_dir", ctypes.c_char_p), ("prefer_cublaslt", ctypes.c_int), ("predicted_kernels", ctypes.c_int),
                ("autotune", ctypes.c_int), ("autotune_candidates", ctypes.c_int), ("check_routes", ctypes.c_int)]


def candidate_paths():
    """Where librlgemm.so is looked for, in order (see the module docstring)."""
    env = os.environ.get("RLGEMM_LIBRARY")
    if env:
        return [Path(env)]
    here = Path(__file__).resolve().parent
    repo = here.parent.parent
    paths = [here / "librlgemm.so", repo / "build" / "librlgemm.so"]
    paths += sorted(p for p in repo.glob("build-*/librlgemm.so"))
    return paths


_lock = threading.Lock()
_lib = None


def _declare(lib):
    i64, vp, cp, i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    handle_p = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "rlgemm_create": [handle_p, cp],
        "rlgemm_create_ex": [handle_p, cp, cp, cp, i32, cp],
        "rlgemm_create_with_options": [handle_p, ctypes.POINTER(Options)],
        "rlgemm_destroy": [vp],
        "rlgemm_prepare": [vp, i64, i64, i64, i32, vp],
        "rlgemm_hgemm": [vp, vp, i64, i64, i64, vp, vp, i32, vp],
        "rlgemm_hgemm_workspace": [vp, vp, i64, i64, i64, vp, vp, i32, vp, vp, ctypes.c_size_t],
        "rlgemm_workspace_size": [vp, vp, i64, i64, i64, i32, ctypes.POINTER(ctypes.c_size_t)],
        "rlgemm_stats": [vp, ctypes.POINTER(Stats)],
        "rlgemm_first_use_seconds": [vp] + [ctypes.POINTER(ctypes.c_double)] * 3,
        "rlgemm_describe": [vp, i64, i64, i64, i32, ctypes.c_char_p, ctypes.c_size_t],
        "rlgemm_prepare_ex": [vp, i64, i64, i64, i32, i32, vp],
        "rlgemm_hgemm_ex": [vp, vp, i64, i64, i64, vp, vp, i32, vp, i32, vp, ctypes.c_size_t],
        "rlgemm_gemm_bias_ex": [vp, vp, i64, i64, i64, vp, vp, i32, vp, i32, vp, vp, ctypes.c_size_t],
        "rlgemm_workspace_size_ex": [vp, vp, i64, i64, i64, i32, i32, ctypes.POINTER(ctypes.c_size_t)],
        "rlgemm_describe_ex": [vp, i64, i64, i64, i32, i32, ctypes.c_char_p, ctypes.c_size_t],
    }
    for name, args in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.rlgemm_default_options.argtypes = []
    lib.rlgemm_default_options.restype = Options
    lib.rlgemm_last_error.argtypes = []
    lib.rlgemm_last_error.restype = ctypes.c_char_p
    lib.rlgemm_version.argtypes = []
    lib.rlgemm_version.restype = ctypes.c_char_p


def library_path():
    """The librlgemm.so to load: the first candidate that exists, else the system's (by name). Raises
    LibraryNotFound naming every place looked at."""
    tried = []
    for path in candidate_paths():
        if path.is_file():
            return str(path)
        tried.append(str(path))
    found = None if os.environ.get("RLGEMM_LIBRARY") else ctypes.util.find_library("rlgemm")
    if not found:
        raise LibraryNotFound(
            "librlgemm.so not found (looked at: " + ", ".join(tried) + ", and the system library path). "
            "Build it (cmake --build build --target rlgemm_shared) and set RLGEMM_LIBRARY=/path/to/librlgemm.so")
    return found


def library():
    """The loaded librlgemm (ctypes.CDLL), loaded on first use."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(library_path())
        _declare(lib)
        _lib = lib
        return lib


def check(status):
    if status != OK:
        message = library().rlgemm_last_error().decode("utf-8", "replace")
        raise RlgemmError(status, message)


def version():
    return library().rlgemm_version().decode()


def options_from_environment():
    """The handle options the operators start from: RLGEMM_DATABASE, RLGEMM_TUNED_TABLE, RLGEMM_POLICY,
    RLGEMM_PREFER_CUBLASLT (0/1, default 1), RLGEMM_AUTOTUNE (0/1, default 0), RLGEMM_CHECK_ROUTES (0/1, default 1);
    keyword arguments of Handle and of rlgemm.configure."""
    return dict(database=os.environ.get("RLGEMM_DATABASE"), tuned_table=os.environ.get("RLGEMM_TUNED_TABLE"),
                policy=os.environ.get("RLGEMM_POLICY"),
                prefer_cublaslt=os.environ.get("RLGEMM_PREFER_CUBLASLT", "1") != "0", cache_dir=None,
                autotune=os.environ.get("RLGEMM_AUTOTUNE", "0") != "0",
                check_routes=os.environ.get("RLGEMM_CHECK_ROUTES", "1") != "0")


class Handle:
    """One rlgemm handle (rlgemm::Handle) on the current CUDA device."""

    def __init__(self, database=None, tuned_table=None, policy=None, prefer_cublaslt=True, cache_dir=None,
                 predicted_kernels=True, autotune=False, autotune_candidates=4, check_routes=True):
        lib = library()
        enc = lambda s: None if s is None else os.fsencode(s)
        options = lib.rlgemm_default_options()
        options.database, options.tuned_table = enc(database), enc(tuned_table)
        options.policy, options.cache_dir = enc(policy), enc(cache_dir)
        options.prefer_cublaslt = 1 if prefer_cublaslt else 0
        options.predicted_kernels = 1 if predicted_kernels else 0
        options.autotune = 1 if autotune else 0
        options.autotune_candidates = int(autotune_candidates)
        options.check_routes = 1 if check_routes else 0
        handle = ctypes.c_void_p()
        check(lib.rlgemm_create_with_options(ctypes.byref(handle), ctypes.byref(options)))
        self._handle = handle
        self._lib = lib
        self._owned = True

    @classmethod
    def borrowed(cls, address):
        """A handle someone else owns (the C++ operator library's), called through this layer; never destroyed
        here."""
        self = cls.__new__(cls)
        self._handle = ctypes.c_void_p(address)
        self._lib = library()
        self._owned = False
        return self

    @property
    def pointer(self):
        return self._handle

    def prepare(self, m, n, k, layout, stream=0, dtype=DTYPE_FP16):
        check(self._lib.rlgemm_prepare_ex(self._handle, m, n, k, layout, dtype, ctypes.c_void_p(stream)))

    def hgemm(self, stream, m, n, k, a_ptr, b_ptr, layout, c_ptr):
        check(self._lib.rlgemm_hgemm(self._handle, ctypes.c_void_p(stream), m, n, k, ctypes.c_void_p(a_ptr),
                                     ctypes.c_void_p(b_ptr), layout, ctypes.c_void_p(c_ptr)))

    def hgemm_workspace(self, stream, m, n, k, a_ptr, b_ptr, layout, c_ptr, ws_ptr, ws_bytes):
        check(self._lib.rlgemm_hgemm_workspace(self._handle, ctypes.c_void_p(stream), m, n, k, ctypes.c_void_p(a_ptr),
                                               ctypes.c_void_p(b_ptr), layout, ctypes.c_void_p(c_ptr),
                                               ctypes.c_void_p(ws_ptr or None), ws_bytes))

    def gemm(self, stream, m, n, k, a_ptr, b_ptr, layout, c_ptr, dtype, ws_ptr=0, ws_bytes=0):
        """C = A B with A, B and C of element type `dtype` (DTYPE_FP16 or DTYPE_BF16); the caller's workspace
        when ws_bytes > 0, else the handle's."""
        check(self._lib.rlgemm_hgemm_ex(self._handle, ctypes.c_void_p(stream), m, n, k, ctypes.c_void_p(a_ptr),
                                        ctypes.c_void_p(b_ptr), layout, ctypes.c_void_p(c_ptr), dtype,
                                        ctypes.c_void_p(ws_ptr or None), ws_bytes))

    def gemm_bias(self, stream, m, n, k, a_ptr, b_ptr, layout, c_ptr, dtype, bias_ptr, ws_ptr=0, ws_bytes=0):
        """C = A B + bias, bias a device vector of N elements of `dtype` added to every row; otherwise as gemm."""
        check(self._lib.rlgemm_gemm_bias_ex(self._handle, ctypes.c_void_p(stream), m, n, k, ctypes.c_void_p(a_ptr),
                                            ctypes.c_void_p(b_ptr), layout, ctypes.c_void_p(c_ptr), dtype,
                                            ctypes.c_void_p(bias_ptr), ctypes.c_void_p(ws_ptr or None), ws_bytes))

    def workspace_size(self, m, n, k, layout, stream=0, dtype=DTYPE_FP16):
        size = ctypes.c_size_t()
        check(self._lib.rlgemm_workspace_size_ex(self._handle, ctypes.c_void_p(stream or None), m, n, k, layout,
                                                 dtype, ctypes.byref(size)))
        return size.value

    def stats(self):
        s = Stats()
        check(self._lib.rlgemm_stats(self._handle, ctypes.byref(s)))
        return s.as_dict()

    def first_use_seconds(self):
        """What the shapes' first uses took, in seconds: choosing the cuBLASLt floor (floor_s), building kernels
        (build_s), checking kernel routes against the floor (check_s)."""
        parts = [ctypes.c_double() for _ in range(3)]
        check(self._lib.rlgemm_first_use_seconds(self._handle, *(ctypes.byref(p) for p in parts)))
        return dict(zip(("floor_s", "build_s", "check_s"), (p.value for p in parts)))

    def describe(self, m, n, k, layout, dtype=DTYPE_FP16):
        buf = ctypes.create_string_buffer(8192)  # a checked route tells what it measured: a few hundred characters
        check(self._lib.rlgemm_describe_ex(self._handle, m, n, k, layout, dtype, buf, len(buf)))
        return buf.value.decode()

    def close(self):
        if self._handle and self._owned:
            check(self._lib.rlgemm_destroy(self._handle))
        self._handle = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
