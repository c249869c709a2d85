#!/bin/sh
# runtime-split.sh rewrites Go code written against the engine before issue
# 13's runtime split (engine/session, engine/runtime, engine/cuberun,
# engine/local) to the names the split gave things. Run it on files merged
# from a branch that still uses the old unexported names, then goimports (or
# add the imports by hand) and build:
#
#	scripts/runtime-split.sh engine/*.go engine/local/*.go engine/cuberun/*.go
#
# Exported engine names (SessionMeta, ReadSessionMeta, ...) keep working
# through engine/session_aliases.go; these rules cover what had no alias.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 FILE.go..." >&2; exit 2; }

# Step 1: the session plumbing, now engine/session.
sed -i -E '
s/\bwriteSessionMetaPath\(/session.WriteMetaPath(/g
s/\bwriteSessionMeta\(/session.WriteMeta(/g
s/\binitLogFile\b/session.InitLogFile/g
s/(^|[^.])\bendFIFO\b([^ ]|$)/\1session.EndFIFO\2/g
s/\bmetaTempPrefix\b/session.MetaTempPrefix/g
s/\bdrainErr\(/session.DrainErr(/g
s/\bmarkKilled\(/session.MarkKilled(/g
s/\bunmarkKilled\(/session.UnmarkKilled(/g
s/\bkilledByStrata\(/session.KilledByStrata(/g
s/\bkilledMarker\b/session.KilledMarker/g
s/\binitAlive\(/session.InitAlive(/g
s/\breadProcStat\(/session.ReadProcStat(/g
s/\breadProcStatFile\(/session.ReadProcStatFile(/g
s/\bst\.state\b/st.State/g
s/\bst\.pgrp\b/st.Pgrp/g
s/\bst\.startTime\b/st.StartTime/g
s/\bopenEndWatch\(/session.OpenEndWatch(/g
s/\blostCheckInterval\b/session.LostCheckInterval/g
s/\bnewTranscriptWriter\(/session.NewTranscriptWriter(/g
s/\*transcriptWriter\b/*session.TranscriptWriter/g
s/\btw\.write\(/tw.Append(/g
s/\btw\.writeResize\(/tw.AppendResize(/g
s/\btranscript\.write\(/transcript.Append(/g
s/\btranscript\.writeResize\(/transcript.AppendResize(/g
s/\*ptyServer\b/*session.PTYServer/g
s/\bptyTerminal\b/session.Terminal/g
s/\bopenPTY\(/session.OpenPTY(/g
s/\bnewPTYServer\(/session.NewPTYServer(/g
s/\bnewTerminalServer\(/session.NewTerminalServer(/g
s/\blistenAttach\(/session.ListenAttach(/g
s/\bdialAttach\(/session.DialAttach(/g
s/\bwriteAttachFrame\(/session.WriteAttachFrame(/g
s/\breadAttachFrame\(/session.ReadAttachFrame(/g
s/\battachHello\b/session.AttachHello/g
s/\battachInput\b/session.AttachInput/g
s/\battachResize\b/session.AttachResize/g
s/\battachReplay\b/session.AttachReplay/g
s/\bquietBeforeWaiting\b/session.QuietBeforeWaiting/g
s/\battentionInterval\b/session.AttentionInterval/g
s/\breadSyscalls\b/session.ReadSyscalls/g
s/\bpollSyscalls\b/session.PollSyscalls/g
s/\bpty\.finish\(/pty.Finish(/g
s/\bpty\.pump\(\)/pty.Pump()/g
s/\bpty\.pump\b/pty.Pump/g
s/\bpty\.serve\(\)/pty.Serve()/g
s/\bpty\.lastOutput\.Load\(\)/pty.LastOutput()/g
s/\bpty\.waitingForInput\(\)/pty.WaitingForInput()/g
' "$@"
