"""harness_family_test: one Bazel py_test per op family, running pytest."""

DEFAULT_PLATFORMS = "cpu,cuda,rocm,tpu"

# Inputs every harness test depends on (see //:BUILD.bazel's farm_code, //harnesses:BUILD.bazel).
# Changing any of them re-runs the tests: the sources, the pinned requirements and the
# installation digest (what is really installed in the .venv: jax, jaxlib, plugins,
# numpy/scipy/ml_dtypes; see //tools/bazel:install_digest.bzl).
_PROJECT_DATA = [
    "//:farm_code",
    "//:requirements.txt",
    "//harnesses:harness_srcs",
    "//tools/bazel:install_digest",
]

def harness_family_test(
        name,
        family,
        shard_count = None,
        platforms = DEFAULT_PLATFORMS,
        test_file = "//tools/bazel:family_test.py",
        env = {},
        data = [],
        tags = [],
        **kwargs):
    """A py_test running `pytest <test_file>` for one op family.

    Args:
      name: target name.
      family: op family, exported to the test as FARM_FAMILY.
      shard_count: Bazel shards (tests are split by collection index % shards).
      platforms: comma-separated target platforms, exported as FARM_PLATFORMS.
      test_file: the pytest file to run (label of a .py file).
      env: extra environment variables for the test.
      data: extra runtime files.
      tags: extra tags (the family name is added as a tag).
      **kwargs: passed through to py_test (size, timeout, flaky, ...).
    """
    test_env = {
        "FARM_FAMILY": family,
        "FARM_PLATFORMS": platforms,
    }
    test_env.update(env)

    # 15 minutes, not Bazel's 5 (a medium test's default): beside pytest on the 2-core hosts a
    # family's shard took up to 301 s (pallas_ops), and a timeout there is the host, not the farm.
    kwargs.setdefault("timeout", "long")
    native.py_test(
        name = name,
        srcs = ["//tools/bazel:pytest_main.py"],
        main = "//tools/bazel:pytest_main.py",
        python_version = "PY3",
        srcs_version = "PY3",
        args = ["$(rootpath %s)" % test_file],
        data = _PROJECT_DATA + [test_file] + data,
        env = test_env,
        shard_count = shard_count,
        tags = tags + ["harness", "family:" + family],
        **kwargs
    )
