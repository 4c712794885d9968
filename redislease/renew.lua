-- renew.lua: extend a lease if the caller's token still holds it.
--
-- KEYS[1] lease hash
-- ARGV[1] token, ARGV[2] TTL in whole milliseconds
--
-- Returns 1 when renewed, 0 when the token does not hold the key.

if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
