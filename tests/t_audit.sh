#!/bin/sh
# t_audit.sh — issue 12's list of ops and modules users reached for, item by item, on the
# interpreter, the C target, the Metal emulator and Core ML (milrun), each against PyTorch:
# one family model per tests/audit/*.lua, the runner tests/py/run_audit.py (it states the
# tolerances). AUDIT_TABLE=FILE also writes the item x target table that docs/ops.md
# carries (scripts/audit_table.sh regenerates that section).
. "$(dirname "$0")/lib.sh"
kt_need_kiln audit
kt_work audit
mkdir -p "$WORK/pb"
MILRUN=$WORK/milrun
if ! protoc-c --proto_path=gen/target --c_out="$WORK/pb" gen/target/coreml.proto gen/target/coreml_mil.proto ||
   ! cc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L -I"$WORK/pb" -o "$MILRUN" tests/coreml/milrun.c \
        "$WORK/pb/coreml.pb-c.c" "$WORK/pb/coreml_mil.pb-c.c" -lprotobuf-c -lm; then
  echo "FAIL audit/milrun: tests/coreml/milrun.c does not build"
  exit 1
fi
# shellcheck disable=SC2086
"$PY" tests/py/run_audit.py "$WORK" "$MILRUN" ${AUDIT_TABLE:+--table "$AUDIT_TABLE"} $FAMILIES
