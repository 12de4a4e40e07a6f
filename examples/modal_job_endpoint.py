"""A small Modal web endpoint that gives tailcut a job API for a deployed Modal function.

Modal has no public REST job API; its documented pattern is a web endpoint that spawns a
function call and polls it by call id. tailcut's `modal` adapter speaks this contract:

  POST /submit             body = job input JSON      -> {"call_id": "fc-..."}
  GET  /status/{call_id}   call-graph input status    -> {"status": "PENDING"|"SUCCESS"|"FAILURE"|"INIT_FAILURE"|"TERMINATED"|"TIMEOUT"}
  GET  /result/{call_id}   202 while pending          -> 200 {"result": ...} | 500 {"status": "FAILURE"} | 410 {"status": "EXPIRED"}
  POST /cancel/{call_id}   FunctionCall.cancel()      -> {"cancelled": true}
  GET  /health                                        -> {"ok": true}

PENDING covers queued and running alike (Modal does not tell them apart), so a Modal
provider cannot be a queue-cutover primary. Cancel stops the input; the container then
idles until its scale-down window and may keep billing.

Deploy:  modal deploy examples/modal_job_endpoint.py
Config:  [providers.modal]
         adapter = "modal"
         url = "https://<workspace>--tailcut-jobs-api.modal.run"
         rate_usd_per_s = 0.000704
         # proxy_key_env = "MODAL_PROXY_KEY"; proxy_secret_env = "MODAL_PROXY_SECRET"  (with requires_proxy_auth=True)
"""

import modal
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

APP_NAME = "my-tts-app"        # the app that holds your GPU function
FUNCTION_NAME = "synthesize"   # the function to run per job

app = modal.App("tailcut-jobs")
web = FastAPI()


@web.post("/submit")
async def submit(request: Request):
    payload = await request.json()
    fn = modal.Function.from_name(APP_NAME, FUNCTION_NAME)
    call = await fn.spawn.aio(payload)
    return {"call_id": call.object_id}


@web.get("/status/{call_id}")
async def status(call_id: str):
    call = modal.FunctionCall.from_id(call_id)
    graph = await call.get_call_graph.aio()
    state = graph[0].status.name if graph else "PENDING"
    return {"call_id": call_id, "status": state}


@web.get("/result/{call_id}")
async def result(call_id: str):
    call = modal.FunctionCall.from_id(call_id)
    try:
        value = await call.get.aio(timeout=0)
    except TimeoutError:
        return JSONResponse({"status": "PENDING"}, status_code=202)
    except modal.exception.OutputExpiredError:
        return JSONResponse({"status": "EXPIRED"}, status_code=410)
    except Exception as exc:  # the function raised
        return JSONResponse({"status": "FAILURE", "error": str(exc)[:500]}, status_code=500)
    return {"result": value}


@web.post("/cancel/{call_id}")
async def cancel(call_id: str):
    call = modal.FunctionCall.from_id(call_id)
    await call.cancel.aio()
    return {"cancelled": True}


@web.get("/health")
async def health():
    return {"ok": True}


@app.function()
@modal.asgi_app(label="tailcut-jobs-api")
def api():
    return web
