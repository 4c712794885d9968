-- renew.lua: extend a lease if the caller's token still holds it.
--
-- KEYS[1] lease (token NUL fence NUL holder, see grant.lua)
-- ARGV[1] token followed by a NUL byte, ARGV[2] TTL in whole milliseconds
--
-- Returns 1 when renewed, 0 when the token does not hold the key. Tokens
-- contain no NUL, so a lease that starts with ARGV[1] holds exactly that
-- token.

local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
