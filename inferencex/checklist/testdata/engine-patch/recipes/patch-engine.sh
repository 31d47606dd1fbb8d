#!/bin/bash
# Rewrites the installed scheduler before launch.
set -e
git apply /configs/scheduler-fix.patch
