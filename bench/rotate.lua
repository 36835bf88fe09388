-- wrk script: cycle through prebuilt requests, one per line of the file named by the
-- first argument after "--": "<path>\t<cookie>". Every endpoint of the closed-loop
-- benchmark goes through this same script, so the generator's cost is the same for all.
local requests = {}
-- the same User-Agent as bench/common.py: Flask-Login ties the session to it
USER_AGENT = "Mozilla/5.0 (bench) htmx/2.0"
local i = 0

function init(args)
  for line in io.lines(args[1]) do
    local path, cookie = line:match("^([^\t]+)\t(.*)$")
    if path then
      local headers = {["HX-Request"] = "true", ["User-Agent"] = USER_AGENT}
      if cookie ~= "" then headers["Cookie"] = cookie end
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
