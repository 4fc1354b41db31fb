# The same API through the Python `openai` package: logprobs, n with a seed, a streamed request
# past the context, a get_weather tool round trip, json_schema answers. Run by openai-api.deno.ts
# with STRATA_GATEWAY, STRATA_KEY and the schemas (STRATA_WEATHER, STRATA_PERSON); prints JSON.
import json
import os

import openai

client = openai.OpenAI(base_url=os.environ["STRATA_GATEWAY"] + "/v1", api_key=os.environ["STRATA_KEY"], max_retries=0)
messages = [{"role": "user", "content": "What is the capital of France?"}]
out = {"version": openai.__version__}

r = client.chat.completions.create(
    model="smollm2", messages=messages, temperature=0, max_tokens=8, logprobs=True, top_logprobs=5
)
out["logprobs"] = [[c.token, c.logprob, [t.token for t in c.top_logprobs]] for c in r.choices[0].logprobs.content]
out["text"] = r.choices[0].message.content

r = client.chat.completions.create(model="smollm2", messages=messages, temperature=1, max_tokens=12, n=3, seed=7)
out["n"] = [c.message.content for c in r.choices]

try:
    s = client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=10_000_000, stream=True
    )
    out["past_context"] = {"streamed": [c.model_dump() for c in s]}
except openai.BadRequestError as e:
    out["past_context"] = {"status": e.status_code, "code": e.code}

weather = json.loads(os.environ["STRATA_WEATHER"])
ask = [{"role": "user", "content": "What is the weather like in Paris today?"}]
common = dict(model="smollm2", tools=[weather], parallel_tool_calls=False, temperature=0, max_tokens=100)
r = client.chat.completions.create(messages=ask, tool_choice="required", **common)
call = r.choices[0].message.tool_calls[0]
streamed = {}
finish = None
for c in client.chat.completions.create(messages=ask, tool_choice="required", stream=True, **common):
    if c.choices and c.choices[0].delta.tool_calls:
        f = c.choices[0].delta.tool_calls[0].function
        streamed = {"name": f.name, "arguments": f.arguments}
    if c.choices and c.choices[0].finish_reason:
        finish = c.choices[0].finish_reason
follow_up = ask + [
    r.choices[0].message.model_dump(exclude_none=True),
    {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"city": "Paris", "temperature_c": 18})},
]
final = client.chat.completions.create(messages=follow_up, tool_choice="none", **common)
out["tools"] = {
    "finish_reason": r.choices[0].finish_reason,
    "name": call.function.name,
    "arguments": json.loads(call.function.arguments),
    "streamed": streamed,
    "streamed_finish": finish,
    "final": {"finish_reason": final.choices[0].finish_reason, "content": final.choices[0].message.content},
}

person = json.loads(os.environ["STRATA_PERSON"])
out["json_schema"] = [
    client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Describe a person, as JSON."}],
        temperature=1,
        seed=seed,
        max_tokens=400,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": person, "strict": True}},
    ).choices[0].message.content
    for seed in range(3)
]

print(json.dumps(out))
