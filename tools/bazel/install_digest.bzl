"""install_digest: the installation digest as a file that tests can depend on.

Bazel only re-runs a test when one of its inputs changes, and what is installed in the
interpreter (jax, jaxlib, PJRT plugins, numpy/scipy/ml_dtypes) is not a file in the
workspace. So the digest comes in through the workspace status: .bazelrc sets
`--workspace_status_command=tools/bazel/workspace_status.sh`, which Bazel runs at the
start of every build (whatever launcher started it: bazelisk, Debian's wrapper or the
binary itself) and which prints `STABLE_FARM_INSTALL_DIGEST <sha256>` into
bazel-out/stable-status.txt. This rule's action reads that file (`ctx.info_file`) and
writes the STABLE_FARM_* lines to `<name>.txt`:

- a changed installation changes stable-status.txt, the action re-runs, its output
  changes and every test with it in its runfiles runs again;
- an unchanged one leaves stable-status.txt as it was: nothing re-runs. (Other stable
  keys, e.g. BUILD_HOST, re-run only this action; its output is the same, so the tests
  stay cached.)
"""

def _install_digest_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.run_shell(
        inputs = [ctx.info_file],
        outputs = [out],
        arguments = [ctx.info_file.path, out.path],
        command = """
grep '^STABLE_FARM_' "$1" | LC_ALL=C sort > "$2"
grep -q '^STABLE_FARM_INSTALL_DIGEST ' "$2" || {
  echo "no STABLE_FARM_INSTALL_DIGEST in $1: the harness tests would not be keyed on" \
       "the installed jax. Build with --workspace_status_command=tools/bazel/workspace_status.sh" \
       "(set in .bazelrc)." >&2
  exit 1
}
""",
        mnemonic = "FarmInstallDigest",
        progress_message = "Keying tests on the installation digest",
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

install_digest = rule(
    implementation = _install_digest_impl,
    doc = "Writes the STABLE_FARM_* workspace status lines (the installation digest) to <name>.txt.",
)
