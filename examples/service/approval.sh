# Approval in the service: a step waits for a person's answer, given over REST.
# Needs pip install "toolplan[service]" (in a checkout: pip install ".[service]"), curl and jq.
export TOOLPLAN_DB=sqlite:///approval.db
RUNNER=$(toolplan keys create bot --no-approve --json | jq -r .secret)  # may run, may not approve
PERSON=$(toolplan keys create alice --json | jq -r .secret)             # may do both
toolplan serve --tools examples/service/tools.py --port 8000 >approval.log 2>&1 &
for _ in $(seq 100); do curl -sf localhost:8000/healthz >/dev/null && break; kill -0 $! 2>/dev/null || break; sleep 0.1; done
curl -sf localhost:8000/healthz >/dev/null || { echo "toolplan serve did not start:" >&2; cat approval.log >&2; false; }
J=(-H "Content-Type: application/json")

PLAN=$(curl -s -H "X-API-Key: $RUNNER" "${J[@]}" localhost:8000/v1/plans -d '{"plan": {"steps": [
  {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
  {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
  {"id": "cmp", "tool": "compare", "arguments": {"x": "$ref:oslo.temp", "y": "$ref:rome.temp"}}],
  "output_steps": ["cmp"]}}' | jq -r .plan_id)
# Steps calling compare wait for an answer; ?wait= returns once the execution waits.
EXEC=$(curl -s -H "X-API-Key: $RUNNER" "${J[@]}" "localhost:8000/v1/plans/$PLAN/executions?wait=30" \
  -d '{"approval": {"tools": ["compare"], "timeout": 600}}' | tee exec.json | jq -r .execution_id)
jq -c '{status, waiting: [.approval.steps[] | {step_id, tool, arguments}]}' exec.json
curl -s -H "X-API-Key: $RUNNER" "${J[@]}" localhost:8000/v1/executions/$EXEC/approvals \
  -d '{"answers": {"cmp": {"approve": true}}}' | jq -c .code                    # "forbidden": 403
curl -s -H "X-API-Key: $PERSON" "${J[@]}" localhost:8000/v1/executions/$EXEC/approvals \
  -d '{"answers": {"cmp": {"approve": true}}}' | jq -c .status                  # "queued": it goes on
curl -sN -H "X-API-Key: $PERSON" localhost:8000/v1/executions/$EXEC/events >/dev/null  # ends at plan_finished
curl -s -H "X-API-Key: $PERSON" localhost:8000/v1/executions/$EXEC | jq -c '{status, outputs}'
kill %1
