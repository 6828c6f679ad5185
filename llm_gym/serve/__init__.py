"""``llm-gym serve``: llm-gym envs over OpenEnv's protocol (extra ``serve``).

:mod:`.environment` is an llm-gym id as an openenv-core ``Environment`` (one per session), :mod:`.app` the server
around openenv-core's ``HTTPEnvServer``, :mod:`.wire` what observations and infos look like as JSON. A client needs
only openenv-core: ``GenericEnvClient(base_url="http://HOST:PORT").sync()``.
"""
