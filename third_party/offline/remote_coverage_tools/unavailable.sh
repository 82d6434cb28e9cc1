#!/bin/sh
echo "coverage tools are not available offline (third_party/offline/remote_coverage_tools stub)" >&2
exit 1
