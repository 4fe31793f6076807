#!/usr/bin/env python3
"""An OpenEnv client for `spade serve`, written with the standard library and Debian's
python3-websockets only (no openenv package): it sends what OpenEnv's EnvClient sends over /ws
({"type": "reset", "data": {...}}, {"type": "step", "data": action}, {"type": "state"},
{"type": "close"}) and reads GET /health and GET /metadata over HTTP.

Usage: openenv_client.py BASE_URL PLAN.json
PLAN.json is a list of {"env_id", "seed", "actions": [...]}. Each entry is played in its own
session; the output (stdout, one JSON document) is a list of {"env_id", "seed", "return",
"transcript"} in `spade play --json`'s shape: the reset as {"action": null, ...}, then one entry
per step, stopping when the episode is done.
"""

import asyncio
import json
import sys
import urllib.request

import websockets


def get_json(base_url, path):
    with urllib.request.urlopen(base_url.rstrip("/") + path, timeout=30) as res:
        return json.loads(res.read().decode("utf-8"))


class SpadeEnvClient:
    """One session: a WebSocket to BASE_URL/ws, one reply per message, errors raised."""

    def __init__(self, base_url):
        url = base_url.rstrip("/")
        if url.startswith("http://"):
            url = "ws://" + url[len("http://"):]
        elif url.startswith("https://"):
            url = "wss://" + url[len("https://"):]
        self.url = url + "/ws"
        self.ws = None

    async def __aenter__(self):
        self.ws = await websockets.connect(self.url, max_size=16 * 2**20)
        return self

    async def __aexit__(self, *exc):
        try:
            await self.ws.send(json.dumps({"type": "close"}))
        finally:
            await self.ws.close()

    async def _call(self, message):
        await self.ws.send(json.dumps(message))
        reply = json.loads(await asyncio.wait_for(self.ws.recv(), timeout=60))
        if reply.get("type") == "error":
            data = reply.get("data", {})
            raise RuntimeError(f"Server error: {data.get('message')} (code: {data.get('code')})")
        return reply["data"]

    async def reset(self, **kwargs):
        return await self._call({"type": "reset", "data": kwargs})

    async def step(self, action):
        return await self._call({"type": "step", "data": action})

    async def state(self):
        return await self._call({"type": "state"})


def entry(action, result):
    obs = result["observation"]
    return {
        "action": action,
        "observation": obs["text"],
        # spade play records the reset with reward 0; OpenEnv sends null there
        "reward": 0 if result["reward"] is None else result["reward"],
        "terminated": obs["terminated"],
        "truncated": obs["truncated"],
    }


async def play(base_url, item):
    async with SpadeEnvClient(base_url) as env:
        result = await env.reset(env_id=item["env_id"], seed=item["seed"])
        transcript = [entry(None, result)]
        for action in item["actions"]:
            result = await env.step({"text": action})
            transcript.append(entry(action, result))
            if result["done"]:
                break
        state = await env.state()
        if state["step_count"] != len(transcript) - 1:
            raise RuntimeError(f"state says {state['step_count']} steps, played {len(transcript) - 1}")
    last = transcript[-1]
    ret = max(-1, min(1, last["reward"])) if last["terminated"] else 0
    return {"env_id": item["env_id"], "seed": item["seed"], "return": ret, "transcript": transcript}


async def main(base_url, plan_path):
    if get_json(base_url, "/health").get("status") != "healthy":
        raise RuntimeError("the server is not healthy")
    served = {e["env_id"] for e in get_json(base_url, "/metadata")["environments"]}
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    missing = [p["env_id"] for p in plan if p["env_id"] not in served]
    if missing:
        raise RuntimeError(f"not served: {missing}")
    # every environment in its own concurrent session, as a trainer's rollouts would be
    return await asyncio.gather(*(play(base_url, item) for item in plan))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: openenv_client.py BASE_URL PLAN.json")
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
