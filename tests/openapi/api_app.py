"""A small FastAPI app whose generated /openapi.json (OpenAPI 3.1) the OpenAPI toolset tests read.

`serve_app` runs it under uvicorn in a thread on 127.0.0.1 (a real server, a real port) and records
the headers and query of every request, so a test can assert what was sent (and what was not).
"""

# No `from __future__ import annotations`: FastAPI reads the route annotations, which name local objects.

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import uvicorn
from fastapi import Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse
from fastapi.security import APIKeyHeader, HTTPBasic, HTTPBasicCredentials, HTTPBearer
from pydantic import BaseModel

KEY = "k-123"
TOKEN = "t-456"


class PetIn(BaseModel):
    name: str
    tag: str | None = None


class Pet(PetIn):
    id: int


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    query: dict[str, str]


def create_app(seen: list[Seen], other_origin: list[str]) -> FastAPI:
    app = FastAPI(title="Pet store")
    pets: dict[int, Pet] = {1: Pet(id=1, name="Rex", tag="dog"), 2: Pet(id=2, name="Tom", tag="cat")}
    api_key = APIKeyHeader(name="X-API-Key", auto_error=False)
    bearer = HTTPBearer(auto_error=False)
    basic = HTTPBasic(auto_error=False)

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        seen.append(Seen(request.method, request.url.path, dict(request.headers), dict(request.query_params)))
        return await call_next(request)

    @app.get("/pets", tags=["pets"], summary="List pets")
    async def list_pets(limit: int = 10, tag: str | None = None) -> list[Pet]:
        found = [p for p in pets.values() if tag is None or p.tag == tag]
        return found[:limit]

    @app.get("/pets/{pet_id}", tags=["pets"], summary="Get one pet")
    async def get_pet(pet_id: int) -> Pet:
        if pet_id not in pets:
            raise HTTPException(404, detail=f"no pet {pet_id}")
        return pets[pet_id]

    @app.post("/pets", tags=["pets"], status_code=201, summary="Add a pet")
    async def create_pet(pet: PetIn) -> Pet:
        new = Pet(id=max(pets) + 1, **pet.model_dump())
        pets[new.id] = new
        return new

    @app.put("/pets/{pet_id}", tags=["pets"], summary="Replace a pet")
    async def replace_pet(pet_id: int, pet: PetIn) -> Pet:
        pets[pet_id] = Pet(id=pet_id, **pet.model_dump())
        return pets[pet_id]

    @app.delete("/pets/{pet_id}", tags=["admin"], status_code=204, summary="Delete a pet")
    async def delete_pet(pet_id: int) -> Response:
        pets.pop(pet_id, None)
        return Response(status_code=204)

    @app.get("/text", summary="A text answer")
    async def text() -> PlainTextResponse:
        return PlainTextResponse("plain words")

    @app.get("/secure/key", tags=["auth"])
    async def with_key(key: Annotated[str | None, Depends(api_key)]) -> dict[str, bool]:
        if key != KEY:
            raise HTTPException(401, detail="bad key")
        return {"ok": True}

    @app.get("/secure/bearer", tags=["auth"])
    async def with_bearer(credentials: Annotated[Any, Depends(bearer)]) -> dict[str, bool]:
        if credentials is None or credentials.credentials != TOKEN:
            raise HTTPException(401, detail="bad token")
        return {"ok": True}

    @app.get("/secure/basic", tags=["auth"])
    async def with_basic(credentials: Annotated[HTTPBasicCredentials | None, Depends(basic)]) -> dict[str, str]:
        if credentials is None or (credentials.username, credentials.password) != ("ann", "pw"):
            raise HTTPException(401, detail="bad user")
        return {"user": credentials.username}

    @app.get("/echo", tags=["debug"])
    async def echo(request: Request, x_trace: Annotated[str | None, Header()] = None) -> dict[str, Any]:
        return {"trace": x_trace, "query": dict(request.query_params), "cookies": dict(request.cookies)}

    @app.get("/hop", tags=["debug"], summary="Redirect to the same API on another origin")
    async def hop() -> RedirectResponse:
        return RedirectResponse(other_origin[0] + "/echo-auth", status_code=307)

    @app.get("/hop-here", tags=["debug"], summary="Redirect within this origin")
    async def hop_here() -> RedirectResponse:
        return RedirectResponse("/echo-auth", status_code=307)

    @app.get("/echo-auth", tags=["debug"])
    async def echo_auth(request: Request) -> dict[str, Any]:
        return {"authorization": request.headers.get("authorization"), "key": request.headers.get("x-api-key")}

    return app


@dataclass
class ApiServer:
    url: str
    port: int
    seen: list[Seen] = field(default_factory=list)


@contextmanager
def serve_app() -> Iterator[ApiServer]:
    """The app under uvicorn in a thread; its URL is http://127.0.0.1:PORT (localhost:PORT is another origin)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    other: list[str] = [f"http://localhost:{port}"]
    api = ApiServer(url=f"http://127.0.0.1:{port}", port=port)
    server = uvicorn.Server(uvicorn.Config(create_app(api.seen, other), log_level="warning", lifespan="off"))
    ready = threading.Event()

    def run() -> None:
        async def main() -> None:
            ready.set()
            await server.serve(sockets=[sock])

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield api
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
