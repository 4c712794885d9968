-- break.lua: evict the writer or every reader of KEYS[1], keeping the queue;
-- tombstone each evicted token in KEYS[8] until its hold would have expired
-- and announce key ARGV[2] on channel ARGV[1] as release.lua does.
-- KEYS: as entry.lua's. Returns the entry before the break.
local _, now = clock()
local e = entry(now)
local hs = e[1]
if #hs == 0 then
  return e
end
for i = 1, #hs, 5 do
  redis.call('ZADD', KEYS[8], now + hs[i + 3], hs[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', now)
local last = redis.call('ZRANGE', KEYS[8], -1, -1, 'WITHSCORES')[2]
if last then
  redis.call('PEXPIRE', KEYS[8], tonumber(last) - now)
end
redis.call('DEL', KEYS[1], KEYS[6], KEYS[7])
announce(KEYS[5], e[2][1], ARGV[1], ARGV[2])
return e
