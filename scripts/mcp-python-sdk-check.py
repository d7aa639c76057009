"""A check from outside with the official MCP Python SDK (run by hand, not by CI): the tool
`announce` of tests/bin/mcp_host.rs, which samples the client's model and then
asks for a form, called over stdio with protocol 2026-07-28; the server is SIGKILLed while each
wait is open, and the call goes on by input-required rounds in a new process on the same data
directory, each step running once. Prints each round; fails on any surprise.

    python3 -m venv /tmp/mcp-py && /tmp/mcp-py/bin/pip install mcp==2.3.0
    cargo build -p eve-tests --bin mcp-host
    /tmp/mcp-py/bin/python scripts/mcp-python-sdk-check.py target/debug/mcp-host
"""
import asyncio, os, signal, subprocess, sys, tempfile
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

HOST = sys.argv[1]
DIR = tempfile.mkdtemp()
ENV = {**os.environ, "EVE_DATA_DIR": DIR, "EVE_MCP_COUNTS": os.path.join(DIR, "counts")}
ARGS = {"topic": "eve 1.0"}

def server_pids():
    out = subprocess.run(["pgrep", "-f", HOST], capture_output=True, text=True).stdout.split()
    pids = []
    for pid in out:
        try:
            if f"EVE_DATA_DIR={DIR}".encode() in open(f"/proc/{pid}/environ", "rb").read():
                pids.append(int(pid))
        except OSError:
            pass
    return pids

async def round_(state=None, responses=None, kill=False):
    params = StdioServerParameters(command=HOST, args=["mcp"], env=ENV)
    result = None
    try:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, sampling_callback=sample_cb,
                                     elicitation_callback=elicit_cb) as session:
                await session.discover()
                result = await session.call_tool("announce", ARGS, input_responses=responses,
                                                 request_state=state, allow_input_required=True)
                if kill:
                    pids = server_pids()
                    assert pids, "the server process is found"
                    for pid in pids:
                        os.kill(pid, signal.SIGKILL)
                    print(f"  SIGKILLed server {pids} with the wait open")
    except BaseException as error:  # the dead server ends the session noisily
        if result is None:
            raise
        print(f"  (session ended: {type(error).__name__})")
    return result

async def sample_cb(context, params):
    raise SystemExit("the server sent sampling/createMessage mid-call; expected an input-required round")

async def elicit_cb(context, params):
    raise SystemExit("the server sent elicitation/create mid-call; expected an input-required round")

def answer(request):
    body = request.model_dump(by_alias=True, exclude_none=True)
    method = body.get("method")
    if method == "sampling/createMessage":
        print("  sampling request:", body["params"]["messages"][0]["content"]["text"])
        return {"role": "assistant", "content": {"type": "text", "text": "Eve 1.0 is out."},
                "model": "python-sdk-test", "stopReason": "endTurn"}
    if method == "elicitation/create":
        print("  form:", body["params"]["message"], sorted(body["params"]["requestedSchema"]["properties"]))
        return {"action": "accept", "content": {"channel": "releases", "copies": 2}}
    raise SystemExit(f"unexpected input request {body}")

async def main():
    result = await round_(kill=True)
    for round_no in range(1, 5):
        print(f"round {round_no}: {type(result).__name__}")
        if not isinstance(result, types.InputRequiredResult):
            break
        responses = {key: answer(req) for key, req in (result.input_requests or {}).items()}
        result = await round_(result.request_state, responses, kill=round_no == 1)
    print("result:", result.content[0].text if hasattr(result, "content") else result)
    counts = open(os.path.join(DIR, "counts")).read().split("\n")
    print("steps run:", [c for c in counts if c])
    assert [c for c in counts if c] == ["outline", "draft Eve 1.0 is out.", "publish releases x2"], counts

asyncio.run(main())
