-- renew.lua: extend KEYS[1] to ARGV[2] ms if token ARGV[1] holds it.
-- Returns 1 when renewed, 0 when not held.
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. '\0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
