#!/usr/bin/env bash
# A scripted stand-in for pinentry, speaking its side of Assuan: each GETPIN is answered with the
# next line of $PINENTRY_ANSWERS (a line CANCEL, or no line left, cancels as the Cancel button
# does). Every command received is appended to $PINENTRY_LOG.
answers=${PINENTRY_ANSWERS:?}
log=${PINENTRY_LOG:-/dev/null}
# Where the file $PINENTRY_RUNS exists, each run appends "start" and "end" to it, and each
# answer waits a moment, so a test can see how many ran at once.
runs=${PINENTRY_RUNS:-}
[ -e "$runs" ] || runs=
[ -z "$runs" ] || { echo start >> "$runs"; trap 'echo end >> "$runs"' EXIT; trap 'exit 0' TERM; }
echo "OK Pleased to meet you"
while IFS= read -r line; do
    printf '%s\n' "$line" >> "$log"
    case "$line" in
        GETPIN)
            [ -z "$runs" ] || sleep 0.2
            answer=$(head -n 1 "$answers")
            sed -i 1d "$answers"
            if [ -z "$answer" ] || [ "$answer" = CANCEL ]; then
                echo "ERR 83886179 Operation cancelled <Pinentry>"
            else
                printf 'D %s\nOK\n' "$answer"
            fi ;;
        BYE) echo OK; exit 0 ;;
        *) echo OK ;;
    esac
done
