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
s/\breadyMessage\b/session.ReadyMessage/g
s/\bawaitReady\(/session.AwaitReady(/g
' "$@"

# Step 2: the runtime interface (engine/runtime) has exported methods.
sed -i -E '
s/\b(runtimeFor\([^()]*\)|runtimeOf\([^()]*\)|rt)\.(kind|hostView|layerDirs|upperIn|sendSignal|sized|details|prepare|realize|precheck|startSession|shellArgv|freeze|writers|snapshot|rollback|quiesce|resume|usage|destroy|reviveSession|placement)\(/\1.\u\2(/g
s/\.envAndCwd\(/.EnvAndCwd(/g
s/\bsortedWriters\(/runtime.SortedWriters(/g
' "$@"

# Step 2: the cube runtime, now engine/cuberun. In package engine, its
# unexported entry points became methods of e.cube (a *cuberun.Runtime):
for f in "$@"; do
	case "$f" in
	*/cuberun/*)
		# Code carried into engine/cuberun by rename detection: the
		# receiver is the runtime, the engine is its Host.
		sed -i -E '
s/^func \(e \*Engine\)/func (e *Runtime)/
s/^func \((r )?cubeRuntime\)/func (r *Runtime)/
s/\br\.e\./r./g
s/\be\.Config\.Path\(\)/e.cfg().Path/g
s/\be\.Config\b/e.cfg()/g
s/\be\.cube\.(given|mu|key|made)\b/e.clients.\1/g
s/\be\.lockedWorld\(/e.h.LockedWorld(/g
s/\be\.lockWorld\(/e.h.LockWorld(/g
s/\be\.runningSessions\(/e.h.RunningSessions(/g
s/\be\.stopSessions\(/e.h.StopSessions(/g
s/\be\.sessionNetwork\(/e.h.SessionNetwork(/g
s/\be\.EgressAllowlist\(/e.h.EgressAllowlist(/g
s/\be\.World\(/e.h.World(/g
s/\be\.SessionDir\(/e.h.SessionDir(/g
s/\be\.activity\(ctx, Event\{Type: EventSessionStarted, World: ([^,]+), Session: ([^,]+), Detail: (.*)\}\)$/e.h.SessionStarted(ctx, \1, \2, \3)/
s/\be\.activity\(ctx, Event\{Type: EventSessionEnded, World: ([^,]+), Session: ([^,]+), Detail: (.*)\}\)$/e.h.SessionEnded(ctx, \1, \2, \3)/
s/\bcubeKillGrace\b/CubeKillGrace/g
s/\bcubeBuildPoll\b/CubeBuildPoll/g
s/\bcubeResolve\b/CubeResolve/g
s/\bwithCubeClock\(/WithCubeClock(/g
' "$f" ;;
	*_test.go)
		# engine's cube tests: cube_bridge_test.go keeps e.cubeClient() and
		# friends; the tunables are cuberun's.
		sed -i -E '
s/\bcubeKillGrace\b/cuberun.CubeKillGrace/g
s/\bcubeBuildPoll\b/cuberun.CubeBuildPoll/g
s/\bcubeResolve\b/cuberun.CubeResolve/g
s/\bwithCubeClock\(/cuberun.WithCubeClock(/g
s/\bcubeMetaWorldID\b/"strata-world-id"/g
' "$f" ;;
	*)
		sed -i -E '
s/\be\.cubeClient\(\)/e.cube.Client()/g
s/\be\.cubeSandbox\(/e.cube.Sandbox(/g
s/\be\.cubeDoctor\(/e.cube.Doctor(/g
s/\be\.cubeConfigured\(\)/e.cube.Configured()/g
s/\be\.cubeTemplatesFile\(\)/e.cube.TemplatesFile()/g
s/\bcubeTemplateOf\(/cuberun.TemplateOf(/g
s/\be\.stopWorldRuntime\(ctx, ([a-z]+)\)/e.runtimeFor(\1).Destroy(ctx, \1)/g
s/\be\.cubeFreeze\(ctx, ([a-z]+)\)/e.runtimeFor(\1).Freeze(ctx, \1)/g
' "$f" ;;
	esac
done
