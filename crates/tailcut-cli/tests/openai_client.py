"""Drives the tailcut gateway with the official `openai` Python client.

Usage: python3 openai_client.py BASE_URL MODE   (MODE: stream | plain)
Prints one JSON line: {"content": ..., "chunks": N, "roles": N, "winner": ...}
"""
import json
import sys

import openai

base, mode = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="test-key", max_retries=0, timeout=30)
messages = [{"role": "user", "content": "say hi"}]
if mode == "stream":
    raw = client.chat.completions.with_raw_response.create(model="m", messages=messages, stream=True, stream_options={"include_usage": True})
    winner = raw.headers.get("x-tailcut-winner")
    stream = raw.parse()
    content, chunks, roles, usage = "", 0, 0, None
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage.total_tokens
        for choice in chunk.choices:
            if choice.delta.role:
                roles += 1
            if choice.delta.content:
                content += choice.delta.content
    print(json.dumps({"content": content, "chunks": chunks, "roles": roles, "usage": usage, "winner": winner}))
else:
    raw = client.chat.completions.with_raw_response.create(model="m", messages=messages)
    winner = raw.headers.get("x-tailcut-winner")
    resp = raw.parse()
    print(json.dumps({"content": resp.choices[0].message.content, "chunks": 1, "roles": 1, "usage": resp.usage.total_tokens if resp.usage else None, "winner": winner}))
