# Needs pip install "toolplan[service]" (in a checkout: pip install ".[service]"), curl and jq.
export TOOLPLAN_DB=sqlite:///service.db
KEY=$(toolplan keys create demo --json | jq -r .secret)       # shown once, stored hashed
toolplan serve --tools examples/service/tools.py --port 8000 2>service.log &  # + --model to plan questions
for _ in $(seq 100); do curl -sf localhost:8000/healthz >/dev/null && break; kill -0 $! 2>/dev/null || break; sleep 0.1; done
curl -sf localhost:8000/healthz >/dev/null || { echo "toolplan serve did not start; service.log says:" >&2; cat service.log >&2; false; }
H=(-H "X-API-Key: $KEY" -H "Content-Type: application/json")

PLAN=$(curl -s "${H[@]}" localhost:8000/v1/plans -d '{"plan": {"steps": [
  {"id": "oslo", "tool": "get_weather", "arguments": {"city": "Oslo"}},
  {"id": "rome", "tool": "get_weather", "arguments": {"city": "Rome"}},
  {"id": "cmp", "tool": "compare", "arguments": {"x": "$ref:oslo.temp", "y": "$ref:rome.temp"}}],
  "output_steps": ["cmp"]}}' | jq -r .plan_id)
EXEC=$(curl -s "${H[@]}" -X POST -H "Idempotency-Key: first-run" \
  localhost:8000/v1/plans/$PLAN/executions | jq -r .execution_id)   # 202: it runs in the service
curl -sN "${H[@]}" localhost:8000/v1/executions/$EXEC/events       # progress, ends with plan_finished
curl -s "${H[@]}" localhost:8000/v1/executions/$EXEC | jq -c '{status, outputs}'
curl -s "${H[@]}" localhost:8000/v1/requests -d '{"query": "Is Oslo warmer than Rome?"}' | jq -c .code  # "no_model": 503
kill %1
