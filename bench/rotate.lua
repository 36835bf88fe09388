-- wrk script: cycle through prebuilt requests, one per line of the file named by the
-- first argument after "--": "<path>\t<cookie>" or "<path>\t<cookie>\t<etag>" (sent as
-- If-None-Match, as a browser that kept the fragment asks). Every endpoint of the
-- closed-loop benchmark goes through this same script, so the generator's cost is the
-- same for all. At the end it prints how many answers were 304 Not Modified.
local requests = {}
-- the same User-Agent as bench/common.py: Flask-Login ties the session to it
USER_AGENT = "Mozilla/5.0 (bench) htmx/2.0"
local i = 0
local threads = {}
not_modified = 0

function setup(thread)
  threads[#threads + 1] = thread
end

function init(args)
  for line in io.lines(args[1]) do
    local path, cookie, etag = line:match("^([^\t]+)\t([^\t]*)\t?(.*)$")
    if path then
      local headers = {["HX-Request"] = "true", ["User-Agent"] = USER_AGENT}
      if cookie ~= "" then headers["Cookie"] = cookie end
      if etag ~= "" then headers["If-None-Match"] = etag end
      requests[#requests + 1] = wrk.format("GET", path, headers)
    end
  end
  -- threads start at different places in the list
  i = math.random(#requests) - 1
end

function request()
  i = i % #requests + 1
  return requests[i]
end

function response(status, headers, body)
  if status == 304 then not_modified = not_modified + 1 end
end

function done(summary, latency, requests)
  local n = 0
  for _, thread in ipairs(threads) do n = n + thread:get("not_modified") end
  io.write(string.format("Not modified: %d\n", n))
end
