-- release.lua: free KEYS[1] if ARGV[1] holds it and take ARGV[1] out of the
-- queue. If that frees the key for the next waiter, publish the key
-- (ARGV[3]), followed by NUL and the first live waiter if any, on ARGV[2],
-- or on ARGV[2] .. ':' .. the waiter's store id when its store listens:
-- only that waiter may take the key, so only its store's clients wake.
-- KEYS: lease, fence counter, queue, queue expiries, queue channels (see
-- acquire.lua).
-- Returns 1 when released, 0 when ARGV[1] did not hold the key.
local lease = redis.call('GET', KEYS[1])
local mine = lease and string.sub(lease, 1, #ARGV[1] + 1) == ARGV[1] .. '\0'
if mine then
  redis.call('DEL', KEYS[1])
end
local msg, channel = ARGV[3], ARGV[2]
if redis.call('EXISTS', KEYS[3]) == 1 then
  local left = redis.call('ZREM', KEYS[3], ARGV[1]) == 1
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
  if not mine and not (left and not lease) then
    return 0
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
    redis.call('ZREM', KEYS[3], w)
    redis.call('ZREM', KEYS[4], w)
    redis.call('HDEL', KEYS[5], w)
  end
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head then
    msg = msg .. '\0' .. head
    local id = redis.call('HGET', KEYS[5], head)
    if id then
      channel = channel .. ':' .. id
    end
  end
elseif not mine then
  return 0
end
redis.call('PUBLISH', channel, msg)
if mine then
  return 1
end
return 0
