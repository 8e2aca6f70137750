"""OpenAPIToolset end to end: a FastAPI app on 127.0.0.1, its /openapi.json read as tools, one plan over them.

    pip install "toolplan[builtin,service]"    # httpx; FastAPI and uvicorn for the demo API
    python examples/openapi/pets_api.py

The API runs in a thread of this process; the toolset fetches its generated document, makes one
tool per operation and a plan adds a pet, reads it back and lists the pets with the same tag, in
one model turn's worth of calls. A real deployment points at a remote API: leave out
``allow_private_networks`` (it is here because the demo API is on loopback).
"""

import asyncio
import socket
import threading

import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from toolplan import execute_plan
from toolplan.builtin import BearerAuth, OpenAPIToolset


class NewPet(BaseModel):
    name: str
    tag: str


class Pet(NewPet):
    id: int


app = FastAPI(title="Pets")
PETS = {1: Pet(id=1, name="Rex", tag="dog")}


@app.get("/pets", operation_id="list_pets", summary="List the pets, optionally those with one tag")
def list_pets(tag: str | None = None) -> list[Pet]:
    return [p for p in PETS.values() if tag is None or p.tag == tag]


@app.get("/pets/{pet_id}", operation_id="get_pet", summary="Get one pet by id")
def get_pet(pet_id: int) -> Pet:
    if pet_id not in PETS:
        raise HTTPException(404, f"no pet {pet_id}")
    return PETS[pet_id]


@app.post("/pets", operation_id="add_pet", summary="Add a pet", status_code=201)
def add_pet(pet: NewPet) -> Pet:
    PETS[len(PETS) + 1] = created = Pet(id=len(PETS) + 1, **pet.model_dump())
    return created


PLAN = {
    "steps": [
        {"id": "add", "tool": "add_pet", "arguments": {"name": "Fido", "tag": "dog"}},
        {"id": "read", "tool": "get_pet", "arguments": {"pet_id": "$ref:add.id"}},
        {"id": "dogs", "tool": "list_pets", "arguments": {"tag": "{{read.tag}}"}},
        {"id": "nobody", "tool": "get_pet", "arguments": {"pet_id": 99}},
    ],
    "output_steps": ["dogs", "nobody"],
}


async def main(url: str) -> None:
    api = await OpenAPIToolset.from_url(
        f"{url}/openapi.json",
        allow_private_networks=True,  # the demo API is on 127.0.0.1
        auth=BearerAuth("demo-token"),  # sent on every call; never part of a tool's schema
    )
    for definition in api.definitions():
        a = definition.annotations
        print(f"{definition.name}: {definition.description!r} read_only={a.read_only} idempotent={a.idempotent}")
    result = await execute_plan(PLAN, [api])
    print("dogs:", [p["name"] for p in result.steps["dogs"].output])
    error = result.steps["nobody"].error
    print("nobody:", error.kind if error else None, "-", error.message if error else "")


def serve() -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


if __name__ == "__main__":
    server, thread, url = serve()
    try:
        asyncio.run(main(url))
    finally:
        server.should_exit = True
        thread.join(10)
