# Sourced by scripts/setup_tests.sh and scripts/test.sh: runs independent steps at the same time,
# each in a lane of its own whose output goes to a log file, printed whole under a header when the
# lane is waited for, so concurrent steps never interleave their lines. Most of these steps wait
# (downloads, JVM starts, timeouts): on 2 cores they overlap well.
#   lane_start NAME COMMAND...   starts COMMAND in the background
#   lane_wait NAME               waits for it, prints its log, returns its exit status
lanes_dir=$(mktemp -d)
declare -A lane_pid=() lane_began=()
# A lane still running when the script exits (a failed step, Ctrl-C) is stopped with it; the
# script's exit status is kept.
lanes_end() {
  local rc=$?
  [ "${#lane_pid[@]}" -eq 0 ] || kill "${lane_pid[@]}" 2>/dev/null
  rm -rf "$lanes_dir"
  exit "$rc"
}
trap lanes_end EXIT

lane_start() {
  local name=$1
  shift
  "$@" >"$lanes_dir/$name.log" 2>&1 &
  lane_pid[$name]=$!
  lane_began[$name]=$SECONDS
}

lane_wait() {
  local name=$1 rc=0
  wait "${lane_pid[$name]}" || rc=$?
  unset "lane_pid[$name]"
  echo "----- $name: exit $rc after $((SECONDS - lane_began[$name])) s -----"
  cat "$lanes_dir/$name.log"
  return "$rc"
}
