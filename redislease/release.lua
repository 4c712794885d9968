-- release.lua: free a lease if the caller's token holds it and announce it.
--
-- KEYS[1] lease hash (the fence counter is kept)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] original lease key
--
-- Returns 1 when released, 0 when the token does not hold the key.

if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
